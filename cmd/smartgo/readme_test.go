package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's state store example runs as written (mosquitto_rr with the
// MQTT 5 properties the store needs) against a standalone process: only
// the host and port are added to each call.
func TestCmdBinaryReadmeStateStoreExample(t *testing.T) {
	if _, err := exec.LookPath("mosquitto_rr"); err != nil {
		t.Skip("mosquitto_rr not installed (apt-get install mosquitto-clients)")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(ss\\(\\) \\{.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no sh block defining ss()")
	}
	p := startBin(t, "standalone", "-data", t.TempDir(), "-set", "registry.listen=127.0.0.1:0",
		"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	m := p.waitLog(t, regexp.MustCompile(`standalone running.*bridge=127\.0\.0\.1:(\d+)`), 60*time.Second)
	// The shard routes reach the registry shortly after start; wait for a
	// GET to be answered before running the README's lines.
	script := regexp.MustCompile(`(?m)^ss `).ReplaceAllString(string(block[1]), "ss -h 127.0.0.1 -p "+m[1]+" ")
	probe := strings.SplitN(string(block[1]), "\nss ", 2)[0] + "\nss -h 127.0.0.1 -p " + m[1] + ` -m $'*2\r\n$3\r\nGET\r\n$5\r\nprobe\r\n'` + "\n"
	run := func(s string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", "-c", s).CombinedOutput()
		if err != nil {
			t.Logf("bash: %v\n%s", err, out)
		}
		return string(out)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(run(probe), "__stat:200"); {
		if time.Now().After(deadline) {
			t.Fatalf("the state store never answered:\n%s", p.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	out := run(script)
	if !regexp.MustCompile(`(?s)^\+OK\r?\n  \(__stat:200 __protVer:1\.0 __ts:\d{15}:\d{5}:\S+\)\n\$5\r?\nhello\r?\n  \(__stat:200 .*\)\n:1\r?\n  \(__stat:200 .*\)\n$`).MatchString(out) {
		t.Fatalf("README example output:\n%q", out)
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d", code)
	}
}

// The README's command table names every command the binary has.
func TestCmdReadmeListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range commandTable {
		if !regexp.MustCompile("(?m)^\\| `smartgo " + name + "[ `]").Match(readme) {
			t.Errorf("README.md's command table has no row for smartgo %s", name)
		}
	}
}

// Every `smartgo admin <command>` that README.md and docs/ tell a user to
// type is a command the binary has (docs/durability.md named `smartgo
// admin msg resend`, which only the console had).
func TestCmdDocsNameOnlyExistingAdminCommands(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	words := regexp.MustCompile(`smartgo admin ([A-Za-z][A-Za-z-]*)(?: ([A-Za-z][A-Za-z-]*))?`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range words.FindAllStringSubmatch(string(b), -1) {
			checked++
			if _, ok := adminTable[m[1]+" "+m[2]]; ok {
				continue
			}
			if _, ok := adminTable[m[1]]; ok {
				continue
			}
			if _, ok := mqadminCommands[m[1]]; ok {
				continue // answered with what to type instead
			}
			// "smartgo admin topic" alone names the group of commands.
			group := false
			for name := range adminTable {
				group = group || strings.HasPrefix(name, m[1]+" ")
			}
			if !group || m[2] != "" && !isProse(m[2]) {
				t.Errorf("%s names %q: smartgo admin has no such command", filepath.Base(f), m[0])
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d mentions of smartgo admin found: the pattern is wrong", checked)
	}
}

// isProse: a word that may follow a group of admin commands in a
// sentence ("smartgo admin topic commands").
func isProse(w string) bool {
	switch w {
	case "commands", "command", "and", "or", "with", "the":
		return true
	}
	return false
}
