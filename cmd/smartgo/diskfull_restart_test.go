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

func testBrokerRestartOnFullDisk(t *testing.T, fill func(t *testing.T, path string)) {
	disk := testutil.MountTmpfs(t, "64m")
	data := filepath.Join(disk, "data")
	rp := startBin(t, "registry", "-listen", "127.0.0.1:0")
	reg := rp.waitLog(t, regexp.MustCompile(`registry running.* addr=(\S+)`), 30*time.Second)[1]
	args := []string{"broker", "-data", data, "-listen", "127.0.0.1:0", "-registries", reg,
		"-set", "metrics.listen=127.0.0.1:0", "-set", "store.segment_size=8MiB", "-set", "store.preallocate=1MiB"}
	b := startBin(t, args...)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	// Past half of the first segment, so that the second one is made
	// ahead of the writer.
	const topic = "FullRestart"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := testProducer(t, []string{reg})
	pad := strings.Repeat("x", 2000)
	sent := map[string]bool{}
	for i := 0; i < 2400; i++ {
		body := fmt.Sprintf("m-%d|%s", i, pad)
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)}); err != nil {
			t.Fatalf("send %d before the disk fills: %v", i, err)
		}
		sent[body] = true
	}
	next := filepath.Join(data, "commitlog", fmt.Sprintf("%020d", 8<<20))
	testutil.WaitFor(t, 30*time.Second, "the next segment made ahead", func() bool { _, err := os.Stat(next); return err == nil })

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done

	b = startBin(t, args...)
	b.waitLog(t, regexp.MustCompile(`store: recovered`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`disk full, refusing writes`), 30*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	// Reads are served: every message sent before the kill.
	if got := pullAll(ctx, t, reg, topic, len(sent)); len(got) != len(sent) {
		t.Fatalf("pulled %d of %d messages after the restart on the full disk:\n%s", len(got), len(sent), b.stderr.String())
	} else {
		for body := range sent {
			if !got[body] {
				t.Fatalf("message %.10q not pulled after the restart", body)
			}
		}
	}
	// Writes are refused with the disk-full error.
	p2 := testProducer(t, []string{reg})
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
