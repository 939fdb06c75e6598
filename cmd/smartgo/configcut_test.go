package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
)

// A broker whose consumerOffset.json was cut half way while it was down
// does not start: it exits non-zero naming the file, and leaves the other
// metadata files as they were. It used to be possible only for an empty
// file to be read as no file, every committed offset gone; a cut file is
// refused the same way. With the file restored it starts and keeps the
// committed offsets.
func TestCmdBinaryBrokerRefusesCutOffsetsFile(t *testing.T) {
	data := t.TempDir()
	cfgDir := filepath.Join(data, "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	om, err := broker.OpenOffsets(cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	om.Commit("billing", "orders", 0, 1234)
	om.Commit("billing", "orders", 1, 567)
	if err := om.Persist(); err != nil {
		t.Fatal(err)
	}
	r := startTestRegistry(t)
	start := func() *proc {
		return startBin(t, "broker", "-data", data, "-listen", "127.0.0.1:0",
			"-set", "metrics.listen=127.0.0.1:0", "-set", `broker.registries=["`+r.Addr().String()+`"]`,
			"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	}
	run := func() {
		p := start()
		p.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
		if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.stderr.String())
		}
	}
	offsetsKept := func() {
		t.Helper()
		om, err := broker.OpenOffsets(cfgDir)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := om.Query("billing", "orders", 0); !ok || o != 1234 {
			t.Fatalf("offset of queue 0: %d %v, want 1234", o, ok)
		}
		if o, ok := om.Query("billing", "orders", 1); !ok || o != 567 {
			t.Fatalf("offset of queue 1: %d %v, want 567", o, ok)
		}
	}
	run()
	offsetsKept()

	path := filepath.Join(cfgDir, broker.ConsumerOffsetFile)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	others := map[string][]byte{} // the other files the broker wrote
	ents, err := os.ReadDir(cfgDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == broker.ConsumerOffsetFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(cfgDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		others[e.Name()] = b
	}
	if _, ok := others[broker.TopicConfigFile]; !ok {
		t.Fatalf("no %s written: %v", broker.TopicConfigFile, ents)
	}
	p := start()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a broker with a cut %s still runs:\n%s", broker.ConsumerOffsetFile, p.stderr.String())
	}
	if p.code == 0 || !strings.Contains(p.stderr.String(), path) || !strings.Contains(p.stderr.String(), "corrupt config file") {
		t.Fatalf("exit %d, want non-zero with an error naming %s:\n%s", p.code, path, p.stderr.String())
	}
	for name, want := range others {
		if b, err := os.ReadFile(filepath.Join(cfgDir, name)); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s changed by the refused start (%v)", name, err)
		}
	}
	if b, _ := os.ReadFile(path); len(b) != len(full)/2 {
		t.Fatalf("the cut file was rewritten by the refused start: %d bytes", len(b))
	}

	if err := os.WriteFile(path, full, 0o644); err != nil {
		t.Fatal(err)
	}
	run()
	offsetsKept()
}
