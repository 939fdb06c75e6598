package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// A broker process on a 64 MiB tmpfs that another process fills to its
// last page gets SIGTERM: consumer offsets committed and delay-level
// progress made since the last save that reached the disk cannot be
// written the usual way (a new file renamed over the old one needs a
// page). The broker keeps them in space it reserved at start, exits 0 and
// says what it could not write and why (WARN); after space frees, the
// restart has every acknowledged message, every committed offset, and
// delivers no delayed message twice. (It used to exit 1, losing the
// offsets committed since the last save: the consumers received those
// messages again, and the delay levels delivered theirs again.)
func TestCmdBinaryBrokerSIGTERMOnFullDiskKeepsOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	f := startFullDiskBrokerWith(t, "-set", "broker.consumer_offset_persist_interval=1h")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const delayed, group = "FullStopDelayed", "full-stop-group"
	sent := f.send(ctx, t, 400)
	p := testProducer(t, []string{f.reg})
	for i := range 10 {
		if _, err := p.Send(ctx, &client.Message{Topic: delayed, Body: []byte(fmt.Sprintf("d-%d", i)), DelayLevel: 1}); err != nil {
			t.Fatalf("delayed send %d: %v", i, err)
		}
	}
	// The delay level delivers them (1 s): its progress moves in memory.
	testutil.WaitFor(t, 60*time.Second, "the delayed messages delivered", func() bool {
		return len(pullAll(shortCtx(ctx, 3*time.Second), t, f.reg, delayed, 10)) == 10
	})
	pc := testGroupConsumer(ctx, t, f.reg, group)
	qs, err := pc.Queues(ctx, fullRestartTopic)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.FillDisk(t, filepath.Join(f.disk, "filler"))
	// Committed on the full disk: held in memory until the stop.
	want := map[client.MessageQueue]int64{}
	for i, mq := range qs {
		want[mq] = int64(7 + i)
		pc.MarkConsumed(mq, want[mq])
	}
	if err := pc.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for mq, off := range want {
		testutil.WaitFor(t, 10*time.Second, "the commit held by the broker", func() bool {
			got, err := pc.Committed(ctx, mq)
			return err == nil && got == off
		})
	}
	pc.Close()

	code, took := f.b.stop(t, syscall.SIGTERM, 30*time.Second)
	logs := f.b.stderr.String()
	if code != exitOK || strings.Contains(logs, "goroutine ") {
		t.Fatalf("exit %d after %v on SIGTERM on the full disk:\n%s", code, took, logs)
	}
	t.Logf("SIGTERM on the full disk: exit %d after %v", code, took.Round(time.Millisecond))
	for _, re := range []string{
		`level=WARN msg="metadata kept in its spare file at shutdown.*consumerOffset.json.spare.*no space left on device`,
		`level=WARN msg="metadata kept in its spare file at shutdown.*delayOffset.json.spare.*no space left on device`,
		`level=WARN msg="store: queue manifest not written at shutdown \(no space\); the next start recovers as after a crash, nothing is lost".*no space left on device`,
	} {
		if !regexp.MustCompile(re).MatchString(logs) {
			t.Fatalf("no %s in the log:\n%s", re, logs)
		}
	}

	if err := os.Remove(filepath.Join(f.disk, "filler")); err != nil {
		t.Fatal(err)
	}
	f.b = startBin(t, f.args...)
	f.b.waitLog(t, regexp.MustCompile(`store: recovered.* abnormal=true`), 60*time.Second) // no queue manifest
	f.b.waitLog(t, regexp.MustCompile(`level=WARN msg="metadata read from its spare.*consumerOffset.json.spare`), 30*time.Second)
	f.b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
	f.pullAllSent(ctx, t, sent, "after the restart")
	pc = testGroupConsumer(ctx, t, f.reg, group)
	if _, err := pc.Queues(ctx, fullRestartTopic); err != nil { // the route
		t.Fatal(err)
	}
	for mq, off := range want {
		got, err := pc.Committed(ctx, mq)
		if err != nil || got != off {
			t.Fatalf("committed offset of %v after the restart: %d, %v; want %d\n%s", mq, got, err, off, f.b.stderr.String())
		}
	}
	pc.Close()
	// No delayed message delivered a second time: the level's progress
	// was kept. Its service runs every 100 ms; give it time to misbehave.
	admin := testAdmin(t, f.reg)
	var n int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n = topicMessages(ctx, t, admin, delayed); n > 10 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != 10 {
		t.Fatalf("%d messages in %s after the restart, want 10 (delivered again)\n%s", n, delayed, f.b.stderr.String())
	}
	if code, _ := f.b.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, f.b.stderr.String())
	}
}

// shortCtx is ctx bounded to d; its cancel runs when ctx ends.
func shortCtx(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	context.AfterFunc(c, cancel)
	return c
}

// testGroupConsumer is a pull consumer of group through reg.
func testGroupConsumer(ctx context.Context, t *testing.T, reg, group string) *client.PullConsumer {
	t.Helper()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: group,
		From: client.ConsumeFromFirst, PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// testAdmin is an admin client through reg.
func testAdmin(t *testing.T, reg string) *admin.Admin {
	t.Helper()
	a, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// topicMessages is how many messages topic's queues hold on every master.
func topicMessages(ctx context.Context, t *testing.T, a *admin.Admin, topic string) int64 {
	t.Helper()
	st, err := a.TopicStats(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, q := range st {
		n += q.MaxOffset - q.MinOffset
	}
	return n
}

// A broker process restarting after kill -9 on a disk another process
// filled to its last page, whose commitlog holds records without their
// consume-queue entries (the queues cannot be rebuilt until space
// frees), gets SIGTERM as soon as its store is recovered: it exits 0
// within a few seconds, saying it stops for the signal, and once space
// frees it restarts with every message. (Its transactions waited 10 s
// for a dispatcher that had reported it could not write, ignoring the
// signal, and the stop then exited 1: consumerOffset.json and
// delayOffset.json could not be replaced on the full disk.)
func TestCmdBinaryBrokerSIGTERMDuringStartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	f := startFullDiskBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sent := f.send(ctx, t, 600)
	f.kill9()
	if err := os.RemoveAll(filepath.Join(f.data, "consumequeue", fullRestartTopic)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(f.disk, "filler")
	testutil.FillDisk(t, filler)

	f.b = startBin(t, f.args...)
	f.b.waitLog(t, regexp.MustCompile(`store: recovered`), 60*time.Second)
	code, took := f.b.stop(t, syscall.SIGTERM, 60*time.Second)
	logs := f.b.stderr.String()
	if code != exitOK || took > 5*time.Second || strings.Contains(logs, "goroutine ") {
		t.Fatalf("exit %d after %v on SIGTERM during the start on the full disk, want 0 within 5 s:\n%s", code, took, logs)
	}
	if !strings.Contains(logs, `msg="shutting down" reason=signal`) {
		t.Fatalf("no line saying the broker stops for the signal:\n%s", logs)
	}
	t.Logf("SIGTERM during the start on the full disk: exit %d after %v", code, took.Round(time.Millisecond))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.b = startBin(t, f.args...)
	f.b.waitLog(t, regexp.MustCompile(`msg="state store open"`), 60*time.Second)
	f.b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
	f.pullAllSent(ctx, t, sent, "after the restart with space")
	if code, _ := f.b.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, f.b.stderr.String())
	}
}
