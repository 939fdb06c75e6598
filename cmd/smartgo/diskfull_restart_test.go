package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
)

// A broker process (with a registry process) killed with -9 while its
// data disk, a 64 MiB tmpfs, is full and restarted on the still full disk:
// it starts, registers, serves pulls of every message sent before, refuses
// sends with the disk-full error, and takes sends again once space frees.
// Both a disk full to its last page (another process filled it) and one
// just above store.disk_full_ratio. The log's next segment had been made
// ahead of the writer (sparse past its first allocation); recovery read
// all of it to tell whether it held anything, and reading a hole of a
// tmpfs file through its mapping needs a page: SIGBUS, the restart died
// in recovery with a Go crash dump.
func TestCmdBinaryBrokerKill9RestartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	for _, tc := range []struct {
		name string
		fill func(t *testing.T, path string)
	}{
		{"full", func(t *testing.T, path string) { testutil.FillDisk(t, path) }},
		{"aboveMark", func(t *testing.T, path string) { fillDiskTo(t, path, 0.95) }},
	} {
		t.Run(tc.name, func(t *testing.T) { testBrokerRestartOnFullDisk(t, tc.fill) })
	}
}

// fullDiskBroker is a registry process and a broker process whose data
// directory is on a 64 MiB tmpfs of the test's.
type fullDiskBroker struct {
	disk, data, reg string
	args            []string // the broker's
	b               *proc
}

const fullRestartTopic = "FullRestart"

func startFullDiskBroker(t *testing.T) *fullDiskBroker {
	t.Helper()
	disk := testutil.MountTmpfs(t, "64m")
	data := filepath.Join(disk, "data")
	rp := startBin(t, "registry", "-listen", "127.0.0.1:0")
	reg := rp.waitLog(t, regexp.MustCompile(`registry running.* addr=(\S+)`), 30*time.Second)[1]
	args := []string{"broker", "-data", data, "-listen", "127.0.0.1:0", "-registries", reg,
		"-set", "metrics.listen=127.0.0.1:0", "-set", "store.segment_size=8MiB", "-set", "store.preallocate=1MiB"}
	b := startBin(t, args...)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
	return &fullDiskBroker{disk: disk, data: data, reg: reg, args: args, b: b}
}

// send sends n distinct bodies of about 2 KB to fullRestartTopic and
// returns them.
func (f *fullDiskBroker) send(ctx context.Context, t *testing.T, n int) map[string]bool {
	t.Helper()
	p := testProducer(t, []string{f.reg})
	pad := strings.Repeat("x", 2000)
	sent := map[string]bool{}
	for i := range n {
		body := fmt.Sprintf("m-%d|%s", i, pad)
		if _, err := p.Send(ctx, &client.Message{Topic: fullRestartTopic, Body: []byte(body)}); err != nil {
			t.Fatalf("send %d before the disk fills: %v", i, err)
		}
		sent[body] = true
	}
	return sent
}

// kill9 kills the broker process with SIGKILL and waits for it.
func (f *fullDiskBroker) kill9() {
	_ = f.b.cmd.Process.Signal(syscall.SIGKILL)
	<-f.b.done
}

// pullAllSent fails the test unless every body of sent is pulled.
func (f *fullDiskBroker) pullAllSent(ctx context.Context, t *testing.T, sent map[string]bool, when string) {
	t.Helper()
	got := pullAll(ctx, t, f.reg, fullRestartTopic, len(sent))
	for body := range sent {
		if !got[body] {
			t.Fatalf("%d of %d messages pulled %s; %.10q missing:\n%s", len(got), len(sent), when, body, f.b.stderr.String())
		}
	}
}

func testBrokerRestartOnFullDisk(t *testing.T, fill func(t *testing.T, path string)) {
	f := startFullDiskBroker(t)
	data, topic := f.data, fullRestartTopic
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Past half of the first segment, so that the second one is made
	// ahead of the writer.
	sent := f.send(ctx, t, 2400)
	next := filepath.Join(data, "commitlog", fmt.Sprintf("%020d", 8<<20))
	testutil.WaitFor(t, 30*time.Second, "the next segment made ahead", func() bool { _, err := os.Stat(next); return err == nil })

	filler := filepath.Join(f.disk, "filler")
	fill(t, filler)
	f.kill9()

	b := startBin(t, f.args...)
	f.b = b
	b.waitLog(t, regexp.MustCompile(`store: recovered`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`disk full, refusing writes`), 30*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	// Reads are served: every message sent before the kill.
	f.pullAllSent(ctx, t, sent, "after the restart on the full disk")
	// Writes are refused with the disk-full error.
	p2 := testProducer(t, []string{f.reg})
	if _, err := p2.Send(ctx, &client.Message{Topic: topic, Body: []byte("refused")}); !errors.Is(err, client.ErrDiskFull) {
		t.Fatalf("send on the full disk after the restart: %v, want client.ErrDiskFull", err)
	}
	// And taken again once space frees, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b.waitLog(t, regexp.MustCompile(`disk has room again`), 30*time.Second)
	testutil.WaitFor(t, 60*time.Second, "a send accepted after space freed", func() bool {
		_, err := p2.Send(ctx, &client.Message{Topic: topic, Body: []byte("after")})
		return err == nil
	})
	if code, _ := b.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, b.stderr.String())
	}
}

// fillDiskTo writes the file at path until the file system under it is
// used to ratio (as the store measures it: 1 - available / total).
func fillDiskTo(t *testing.T, path string, ratio float64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	bs := int64(st.Bsize)
	n := int64(ratio*float64(st.Blocks))*bs - (int64(st.Blocks)-int64(st.Bavail))*bs
	if n <= 0 {
		t.Fatalf("the disk is already past %.0f%%", ratio*100)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pullAll pulls topic from its first offset with a new group until want
// distinct bodies arrived or ctx ends, and returns the bodies.
func pullAll(ctx context.Context, t *testing.T, reg, topic string, want int) map[string]bool {
	t.Helper()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: "full-restart-reader",
		From: client.ConsumeFromFirst, PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	qs, err := pc.Queues(ctx, topic)
	if err == nil {
		err = pc.Assign(qs)
	}
	if err == nil {
		err = pc.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < want && ctx.Err() == nil {
		msgs, err := pc.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("poll: %v", err)
		}
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
	}
	return got
}

// A broker process killed with -9, whose commitlog then holds records
// without their consume-queue entries (here the topic's consume queues
// removed while it is down; a crash on a disk filled by another process
// leaves the same), restarted on a disk full to its last page: its state
// store waits (30 s) for the queues to be rebuilt, which the full disk
// does not allow. It exits with one line that says so and names the
// file it could not write, instead of a bare "consume queues not rebuilt
// after 30s" that left the reason to the ERROR lines before it. Once
// space frees, the next start rebuilds the queues and every message is
// read back.
func TestCmdBinaryBrokerRestartQueuesNotRebuiltOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs, kills a process and waits out a 30 s bound")
	}
	f := startFullDiskBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sent := f.send(ctx, t, 1200) // under half a segment: no segment made ahead
	f.kill9()
	if err := os.RemoveAll(filepath.Join(f.data, "consumequeue", fullRestartTopic)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(f.disk, "filler")
	testutil.FillDisk(t, filler)

	b := startBin(t, f.args...)
	f.b = b
	select {
	case <-b.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("still running 3 min after a start its state store cannot finish:\n%s", b.stderr.String())
	}
	line := regexp.MustCompile(`(?m)^.*msg="broker failed to start".*$`).FindString(b.stderr.String())
	cq := filepath.Join(f.data, "consumequeue", fullRestartTopic)
	if b.code == exitOK || !strings.Contains(line, "full disk") || !strings.Contains(line, "no space left on device") ||
		!strings.Contains(line, cq) || !strings.Contains(line, "free space on the disk of "+f.data) {
		t.Fatalf("exit %d; want one line that says the disk is full and names %s, got %q:\n%s", b.code, cq, line, b.stderr.String())
	}
	t.Logf("exit %d: %s", b.code, line)
	if strings.Contains(b.stderr.String(), "goroutine ") {
		t.Fatalf("crash dump:\n%s", b.stderr.String())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.b = startBin(t, f.args...)
	f.b.waitLog(t, regexp.MustCompile(`twins open`), 60*time.Second)
	f.pullAllSent(ctx, t, sent, "after space freed and a restart")
}
