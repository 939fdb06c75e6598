package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
)

// One SIGTERM while the store recovers after a crash stops the broker
// within moments, exit 0, with a line that says so; the restart recovers
// again and has every message. The recovery here re-dispatches a million
// records (the crash lost the consume queues and the index), about a
// second on an idle machine. (The recovery used to run to its end: the
// first signal waited for it, and only a second one killed the process.)
func TestCmdBinaryBrokerSIGTERMDuringRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a million records through a broker process")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	rp := startBin(t, "registry", "-listen", "127.0.0.1:0")
	reg := rp.waitLog(t, regexp.MustCompile(`registry running.* addr=(\S+)`), 30*time.Second)[1]
	args := []string{"broker", "-data", data, "-listen", "127.0.0.1:0", "-registries", reg, "-set", "metrics.listen=127.0.0.1:0"}
	b := startBin(t, args...)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	const topic, kept = "RecoverStop", 200
	p := testProducer(t, []string{reg})
	sent := map[string]bool{}
	for i := range kept {
		body := fmt.Sprintf("kept-%d", i)
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent[body] = true
	}
	const filler = 600_000
	if code, out, errOut := runBin(t, 3*time.Minute, "bench", "produce", "-registry", reg, "-topic", "RecoverStopFiller",
		"-count", strconv.Itoa(filler), "-size", "8", "-async", "-concurrency", "4"); code != exitOK {
		t.Fatalf("bench produce: exit %d\n%s\n%s", code, out, errOut)
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	for _, d := range []string{"consumequeue", "index"} {
		if err := os.RemoveAll(filepath.Join(data, d)); err != nil {
			t.Fatal(err)
		}
	}

	b = startBin(t, args...)
	b.waitLog(t, regexp.MustCompile(`msg="store: recovering" abnormal=true`), 60*time.Second)
	code, took := b.stop(t, syscall.SIGTERM, 60*time.Second)
	logs := b.stderr.String()
	if strings.Contains(logs, `msg="store: recovered"`) {
		t.Fatalf("the recovery ran to its end after SIGTERM (exit %d after %v):\n%s", code, took, logs)
	}
	if code != exitOK || took > 5*time.Second || strings.Contains(logs, "goroutine ") {
		t.Fatalf("exit %d after %v on SIGTERM during the recovery, want 0 within 5 s:\n%s", code, took, logs)
	}
	if !regexp.MustCompile(`msg="broker start-up interrupted" reason=signal err="broker: store: recovery stopped during [a-z -]+; the next start recovers again: context canceled"`).MatchString(logs) {
		t.Fatalf("no line saying the recovery stopped for the signal:\n%s", logs)
	}
	t.Logf("SIGTERM during the recovery: exit %d after %v", code, took.Round(time.Millisecond))

	b = startBin(t, args...)
	m := b.waitLog(t, regexp.MustCompile(`msg="store: recovered" abnormal=true .* redispatched=(\d+)`), 2*time.Minute)
	if n, _ := strconv.Atoi(m[1]); n < filler+kept {
		t.Fatalf("the recovery after the stopped one re-dispatched %d records, want at least %d", n, filler+kept)
	}
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
	got := pullAll(ctx, t, reg, topic, kept)
	for body := range sent {
		if !got[body] {
			t.Fatalf("%q lost after the stopped recovery (%d of %d back)", body, len(got), kept)
		}
	}
	if code, _ := b.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, b.stderr.String())
	}
}
