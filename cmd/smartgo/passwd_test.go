package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt"
)

// runBinInput is runBin with standard input.
func runBinInput(t *testing.T, input string, args ...string) (int, string, string) {
	t.Helper()
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(input)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// smartgo passwd writes the salted credentials format the bridge reads:
// users added, changed and deleted, other lines kept, mode 0600.
func TestCmdBinaryPasswdFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mqtt.passwd")
	if code, out, stderr := runBinInput(t, "s3cret\n", "passwd", "-f", file, "-u", "alice"); code != exitOK || !strings.Contains(out, "user alice added") {
		t.Fatalf("add: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := runBinInput(t, "", "passwd", "-f", file, "-u", "bob", "-p", "hunter2"); code != exitOK {
		t.Fatalf("add -p: exit %d %q", code, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^alice:pbkdf2-sha256:100000:[A-Za-z0-9+/]{22}:[A-Za-z0-9+/]{43}\nbob:pbkdf2-sha256:100000:`).Match(data) {
		t.Fatalf("file:\n%s", data)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	creds, err := mqtt.ParseCredentials(data)
	if err != nil || !creds.Check("alice", []byte("s3cret")) || !creds.Check("bob", []byte("hunter2")) || creds.Check("alice", []byte("hunter2")) {
		t.Fatalf("parse %v", err)
	}
	// Change alice's password; bob's line stays as it was.
	bobLine := regexp.MustCompile(`(?m)^bob:.*$`).Find(data)
	if code, out, _ := runBinInput(t, "n3w\n", "passwd", "-f", file, "-u", "alice"); code != exitOK || !strings.Contains(out, "changed") {
		t.Fatalf("change: exit %d %q", code, out)
	}
	data, _ = os.ReadFile(file)
	creds, _ = mqtt.ParseCredentials(data)
	if !creds.Check("alice", []byte("n3w")) || creds.Check("alice", []byte("s3cret")) || !bytes.Contains(data, bobLine) || strings.Count(string(data), "alice:") != 1 {
		t.Fatalf("after change:\n%s", data)
	}
	if code, _, _ := runBinInput(t, "", "passwd", "-f", file, "-u", "bob", "-delete"); code != exitOK {
		t.Fatalf("delete: exit %d", code)
	}
	if code, _, stderr := runBinInput(t, "", "passwd", "-f", file, "-u", "bob", "-delete"); code != exitFailure || !strings.Contains(stderr, `no user "bob"`) {
		t.Fatalf("delete twice: exit %d %q", code, stderr)
	}
	for _, bad := range [][]string{{"passwd", "-u", "x"}, {"passwd", "-f", file, "-u", "a:b", "-p", "x"}} {
		if code, _, _ := runBinInput(t, "", bad...); code != exitUsage {
			t.Errorf("%v: exit %d", bad, code)
		}
	}
	if code, _, stderr := runBinInput(t, "", "passwd", "-f", file, "-u", "carol"); code != exitFailure || !strings.Contains(stderr, "no password") {
		t.Errorf("no password: exit %d %q", code, stderr)
	}
	os.WriteFile(file, []byte("garbage\n"), 0o600)
	if code, _, stderr := runBinInput(t, "pw\n", "passwd", "-f", file, "-u", "carol"); code != exitFailure || !strings.Contains(stderr, "line 1") {
		t.Errorf("bad file: exit %d %q", code, stderr)
	}
}

// A credentials file written by smartgo passwd lets mosquitto_pub in with
// the right password and keeps it out with a wrong one or none.
func TestCmdBinaryPasswdMosquitto(t *testing.T) {
	if _, err := exec.LookPath("mosquitto_pub"); err != nil {
		t.Skip("mosquitto_pub not installed (apt-get install mosquitto-clients)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "mqtt.passwd")
	if code, _, stderr := runBinInput(t, "dev1-pass\n", "passwd", "-f", file, "-u", "dev1"); code != exitOK {
		t.Fatalf("passwd: exit %d %q", code, stderr)
	}
	p := startBin(t, "standalone", "-data", filepath.Join(dir, "data"), "-set", "registry.listen=127.0.0.1:0",
		"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "bridge.credentials_file="+file, "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	m := p.waitLog(t, regexp.MustCompile(`standalone running.*bridge=127\.0\.0\.1:(\d+)`), 60*time.Second)
	pub := func(v string, extra ...string) (int, string) {
		args := append([]string{"-h", "127.0.0.1", "-p", m[1], "-V", v, "-q", "1", "-t", "devices/dev1/temp", "-m", "21.5", "-i", "dev1"}, extra...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	for _, v := range []string{"mqttv311", "mqttv5"} {
		if code, out := pub(v, "-u", "dev1", "-P", "dev1-pass"); code != 0 {
			t.Fatalf("%s right password: exit %d %s", v, code, out)
		}
		if code, out := pub(v, "-u", "dev1", "-P", "wrong"); code == 0 || !strings.Contains(strings.ToLower(out), "not authori") && !strings.Contains(strings.ToLower(out), "bad user name or password") {
			t.Fatalf("%s wrong password: exit %d %s", v, code, out)
		}
		if code, _ := pub(v); code == 0 {
			t.Fatalf("%s no password: accepted", v)
		}
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}
