package amqp091

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestDurableQueueOutlivesRetention: messages confirmed into a durable
// queue and never acked stay however old their commitlog segments get.
// A standalone with 64 KiB segments deletes expired segments every
// 200 ms at any hour; a durable queue gets messages between two batches
// of another queue's (deleted afterwards), and every segment file is
// then made two hours old (store.file_reserved_time is a minute).
// Retention deletes the segments before the kept queue's first message
// and keeps the rest; after a restart every confirmed message is there.
func TestDurableQueueOutlivesRetention(t *testing.T) {
	hours := make([]string, 24)
	for h := range hours {
		hours[h] = fmt.Sprintf("%02d", h)
	}
	dir := t.TempDir()
	s := dataServer(t, dir, "store.segment_size=64KiB", "store.max_message_size=32KiB", "store.preallocate=64KiB",
		"store.file_reserved_time=1m", "store.clean_interval=200ms", "store.delete_when="+strings.Join(hours, ";"))
	keep, fill := uniq(t, "keep"), uniq(t, "fill")
	conn := s.dial(t)
	ch := channel(t, conn)
	for _, q := range []string{keep, fill} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	publish := confirmed(t, ch)
	pad := strings.Repeat("x", 1000)
	send := func(q string, n int) []string {
		var bodies []string
		for i := range n {
			b := fmt.Sprintf("%s-%03d-%s", q, i, pad)
			publish("", q, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(b)})
			bodies = append(bodies, b)
		}
		return bodies
	}
	send(fill, 300) // about five segments before the kept messages
	want := send(keep, 50)
	send(fill, 300)
	// Deleting the other queue drops its topic and appends a definitions
	// snapshot at the end: nothing but the kept queue holds the old
	// segments.
	if _, err := ch.QueueDelete(fill, false, false, false); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	logDir := commitlogDir(t, filepath.Join(dir, "data"))
	before := segmentCount(t, logDir)
	old := time.Now().Add(-2 * time.Hour)
	entries, err := os.ReadDir(logDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(logDir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Retention ran: it either stopped at the kept queue (and says so)
	// or, without a floor, deleted every segment but the active one (and
	// the next, prepared ahead of the writer).
	testutil.WaitFor(t, 60*time.Second, "retention to delete the expired segments", func() bool {
		n := segmentCount(t, logDir)
		return n <= 2 || n < before && s.proc.logHas("protected queue still needs")
	})
	after := segmentCount(t, logDir)
	t.Logf("%d commitlog segments before retention, %d after", before, after)

	if err := s.proc.stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.proc.start(); err != nil {
		t.Fatal(err)
	}
	got := consumeAllAck(t, s, keep)
	var lost []string
	for _, b := range want {
		if got[b] == 0 {
			lost = append(lost, b[:len(b)-len(pad)])
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d confirmed messages lost to retention (e.g. %s); %d segments left of %d", len(lost), len(want), lost[0], after, before)
	}
}

// commitlogDir finds the broker's commitlog directory under data.
func commitlogDir(t *testing.T, data string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "commitlog" && found == "" {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no commitlog directory under %s", data)
	}
	return found
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
