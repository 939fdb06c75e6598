package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
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
	return startFullDiskBrokerWith(t)
}

// startFullDiskBrokerWith is startFullDiskBroker with more arguments for
// the broker (-set key=value ...).
func startFullDiskBrokerWith(t *testing.T, extra ...string) *fullDiskBroker {
	t.Helper()
	disk := testutil.MountTmpfs(t, "64m")
	data := filepath.Join(disk, "data")
	rp := startBin(t, "registry", "-listen", "127.0.0.1:0")
	reg := rp.waitLog(t, regexp.MustCompile(`registry running.* addr=(\S+)`), 30*time.Second)[1]
	args := []string{"broker", "-data", data, "-listen", "127.0.0.1:0", "-registries", reg,
		"-set", "metrics.listen=127.0.0.1:0", "-set", "store.segment_size=8MiB", "-set", "store.preallocate=1MiB"}
	args = append(args, extra...)
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
// leaves the same), restarted on a disk full to its last page. The queues
// cannot be rebuilt, so the state store's and the twins' shards, which
// are replayed from them, cannot be loaded: the broker starts anyway. It
// registers, serves pulls of a topic whose queues are intact, refuses
// sends with the disk-full error, answers state store GETs and SETs with
// "unavailable" (a remote front end's router gets it at once, no hang),
// and /readyz and /metrics say the state store and the twins are not
// open and why; a SIGTERM then stops it at once. Once space frees, the queues are rebuilt and the state
// store opens by itself: every key written before the crash is there,
// SETs work, and every message is read back, without a restart. (The
// broker used to exit after 30 s: "consume queues not rebuilt".)
func TestCmdBinaryBrokerRestartQueuesNotRebuiltOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	f := startFullDiskBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const kept = "FullRestartKept"
	p := testProducer(t, []string{f.reg})
	for i := range 20 {
		if _, err := p.Send(ctx, &client.Message{Topic: kept, Body: []byte(fmt.Sprintf("k-%d", i))}); err != nil {
			t.Fatalf("send %d to %s: %v", i, kept, err)
		}
	}
	sent := f.send(ctx, t, 1200) // under half a segment: no segment made ahead
	ss := testStateStoreRouter(t, f.reg)
	keys := map[string]string{}
	for i := range 40 {
		k, v := fmt.Sprintf("key-%d", i), fmt.Sprintf("value-%d", i)
		if err := ssSet(ctx, ss, k, v); err != nil {
			t.Fatalf("SET %s before the crash: %v", k, err)
		}
		keys[k] = v
	}
	f.kill9()
	if err := os.RemoveAll(filepath.Join(f.data, "consumequeue", fullRestartTopic)); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(f.disk, "filler")
	testutil.FillDisk(t, filler)

	b := startBin(t, f.args...)
	f.b = b
	metrics := b.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	b.waitLog(t, regexp.MustCompile(`msg="state store not open: it opens by itself once the consume queues are rebuilt".*no space left on device`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="twin not open: it opens by itself once the consume queues are rebuilt"`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	// Reads of what the queues index are served; writes are refused.
	if got := pullAll(ctx, t, f.reg, kept, 20); len(got) != 20 {
		t.Fatalf("%d of 20 messages of %s pulled on the full disk:\n%s", len(got), kept, b.stderr.String())
	}
	if _, err := p.Send(ctx, &client.Message{Topic: kept, Body: []byte("refused")}); !errors.Is(err, client.ErrDiskFull) {
		t.Fatalf("send on the full disk after the restart: %v, want client.ErrDiskFull", err)
	}
	// The state store answers, with "unavailable", at once.
	for _, op := range []func() error{
		func() error { _, err := ssGet(ctx, ss, "key-1"); return err },
		func() error { return ssSet(ctx, ss, "key-new", "x") },
	} {
		start := time.Now()
		err := op()
		if !errors.Is(err, router.ErrUnavailable) || errors.Is(err, router.ErrDiskFull) || !strings.Contains(err.Error(), "not open yet") {
			t.Fatalf("state store request while its shards are not open: %v, want router.ErrUnavailable saying why", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("state store request took %v to be refused", took)
		}
		t.Logf("refused: %v", err)
	}
	code, body := readyz(t, metrics)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "statestore") || !strings.Contains(body, "not open yet") {
		t.Fatalf("/readyz while the state store is not open: %d %q", code, body)
	}
	t.Logf("/readyz: %d %s", code, body)
	if _, m := getPath(t, metrics, "/metrics"); !strings.Contains(m, "smartgo_statestore_open 0") || !strings.Contains(m, "smartgo_twin_open 0") {
		t.Fatalf("/metrics does not say the state store and the twins are not open:\n%s", m)
	}

	// A stop while the shards wait ends their opening at once, exit 0
	// (what cannot be saved on the full disk goes to the spares), and
	// the next start on the still full disk waits the same way.
	code, took := b.stop(t, syscall.SIGTERM, 30*time.Second)
	if code != exitOK || took > 15*time.Second || strings.Contains(b.stderr.String(), "goroutine ") {
		t.Fatalf("exit %d after %v on SIGTERM while the state store waits:\n%s", code, took, b.stderr.String())
	}
	t.Logf("SIGTERM while the state store waits: exit %d after %v", code, took.Round(time.Millisecond))
	b = startBin(t, f.args...)
	f.b = b
	metrics = b.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	b.waitLog(t, regexp.MustCompile(`msg="state store not open: it opens by itself once the consume queues are rebuilt".*no space left on device`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)

	// Space frees: everything opens, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	b.waitLog(t, regexp.MustCompile(`msg="state store open"`), 60*time.Second)
	b.waitLog(t, regexp.MustCompile(`msg="twins open"`), 60*time.Second)
	for k, v := range keys {
		got, err := ssGet(ctx, ss, k)
		if err != nil || got != v {
			t.Fatalf("GET %s after the state store opened: %q, %v; want %q", k, got, err, v)
		}
	}
	testutil.WaitFor(t, 60*time.Second, "a state store SET accepted after space freed", func() bool {
		return ssSet(ctx, ss, "key-new", "x") == nil
	})
	if got, err := ssGet(ctx, ss, "key-new"); err != nil || got != "x" {
		t.Fatalf("GET key-new: %q, %v", got, err)
	}
	if code, body := readyz(t, metrics); code != http.StatusOK {
		t.Fatalf("/readyz once everything opened: %d %q", code, body)
	}
	f.pullAllSent(ctx, t, sent, "after space freed")
	if code, _ := b.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, b.stderr.String())
	}
	if strings.Contains(b.stderr.String(), "goroutine ") {
		t.Fatalf("crash dump:\n%s", b.stderr.String())
	}
}

// testStateStoreRouter is a state store router (a front end's client of
// the brokers' state store) finding the brokers through reg, closed at
// cleanup.
func testStateStoreRouter(t *testing.T, reg string) *router.Router {
	t.Helper()
	o := router.DefaultOptions(reg)
	o.RequestTimeout = 10 * time.Second
	r, err := router.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// ssSet sets key to value through r.
func ssSet(ctx context.Context, r *router.Router, key, value string) error {
	_, err := ssCall(ctx, r, "SET", key, value)
	return err
}

// ssGet returns key's value through r.
func ssGet(ctx context.Context, r *router.Router, key string) (string, error) {
	v, err := ssCall(ctx, r, "GET", key)
	return string(v.Str), err
}

// ssCall sends one command (verb and arguments) through r and returns
// its decoded reply; an error reply is an error.
func ssCall(ctx context.Context, r *router.Router, args ...string) (statestore.Value, error) {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	req := &protocol.StateStoreRequest{ClientID: "disk-full-test", Payload: statestore.AppendRequest(nil, bs...),
		Timestamp: statestore.HLC{Wall: time.Now().UnixMilli(), Node: "test"}.String(), HasTimestamp: true}
	resp, err := r.Invoke(ctx, []byte(args[1]), req)
	if err != nil {
		return statestore.Value{}, err
	}
	v, err := statestore.DecodeReply(resp.Reply)
	if err != nil {
		return statestore.Value{}, err
	}
	return v, v.Err()
}
