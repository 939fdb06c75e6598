package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jsonKeysUnique reports the first key that appears twice in one JSON
// object of line (encoding/json would silently keep the last one).
func jsonKeysUnique(line string) error {
	dec := json.NewDecoder(strings.NewReader(line))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: v == '{', keys: map[string]bool{}, key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[v] {
					return fmt.Errorf("key %q twice", v)
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

func TestCmdJSONKeysUniqueChecker(t *testing.T) {
	for line, dup := range map[string]bool{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`: false, `{"a":1,"b":2,"a":3}`: true,
		`{"x":{"a":1,"a":2}}`: true, `{"component":"broker","component":"statestore"}`: true} {
		if err := jsonKeysUnique(line); (err != nil) != dup {
			t.Errorf("%s: %v", line, err)
		}
	}
}

// Every JSON log line of a standalone process is an object with each key
// once (the broker's state store and the bridge's clients used to add a
// second "component"), and the first line names the version and commit.
func TestCmdBinaryJSONLogs(t *testing.T) {
	p := startBin(t, "standalone", "-data", t.TempDir(), "-set", "log.format=json", "-set", "log.level=debug",
		"-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0",
		"-set", "console.listen=127.0.0.1:0", "-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	p.waitLog(t, regexp.MustCompile(`"standalone running"`), 60*time.Second)
	// The components below the broker and the bridge have logged by now.
	p.waitLog(t, regexp.MustCompile(`"component":"statestore"`), 30*time.Second)
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
	components := map[string]bool{}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i+1, err, line)
		}
		if err := jsonKeysUnique(line); err != nil {
			t.Errorf("line %d: %v\n%s", i+1, err, line)
		}
		if c, ok := m["component"].(string); ok {
			components[c] = true
		}
		if i == 0 {
			if m["msg"] != "smartgo starting" || m["version"] != version || m["commit"] == nil || m["command"] != "standalone" {
				t.Errorf("first line does not give the build: %s", line)
			}
		}
	}
	for _, c := range []string{"registry", "broker", "statestore", "bridge"} {
		if !components[c] {
			t.Errorf("no line of component %q (have %v)", c, components)
		}
	}
}

// A broker with two registries logs its registration with each (it used to
// log only the first), given the list in TOML syntax on the command line.
func TestCmdBinaryBrokerLogsEveryRegistry(t *testing.T) {
	var addrs []string
	for range 2 {
		addrs = append(addrs, startTestRegistry(t).Addr().String())
	}
	p := startBin(t, "broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0",
		"-set", fmt.Sprintf(`broker.registries=["%s","%s"]`, addrs[0], addrs[1]),
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	for _, a := range addrs {
		p.waitLog(t, regexp.MustCompile(`msg="registered with registry".* registry=`+regexp.QuoteMeta(a)+`\b`), 30*time.Second)
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
	if first, _, _ := strings.Cut(p.stderr.String(), "\n"); !strings.Contains(first, "smartgo starting") || !strings.Contains(first, "commit=") {
		t.Fatalf("first line does not give the build: %s", first)
	}
}
