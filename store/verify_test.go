package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// damageAt xors one byte of the commitlog at physical offset phy, through
// the file (the store's mapping shares its page cache).
func damageAt(t testing.TB, s *Store, phy int64) {
	t.Helper()
	base := phy - phy%s.opts.SegmentSize
	flipByte(t, filepath.Join(s.opts.Root, "commitlog", fileNameFor(base)), phy-base)
}

// Every read path that leaves the process refuses a damaged record, counts
// it and logs it (bounded); the records around it are served. The damage
// is in a header field BODYCRC does not cover (the queue id): only the
// whole-record CRC catches it.
func TestStoreReadPathsRefuseDamagedRecords(t *testing.T) {
	logs := &testutil.LogBuffer{}
	var events []Event
	var evMu sync.Mutex
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Listener = func(ev Event) {
			evMu.Lock()
			events = append(events, ev)
			evMu.Unlock()
		}
	})
	var puts []PutResult
	for i := range 10 {
		puts = append(puts, mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprint("body", i), keys: fmt.Sprint("k", i)}))
	}
	waitIndexed(t, s)
	bad := puts[3]
	damageAt(t, s, bad.PhysicalOffset+record.OffsetQueueID+3)

	for range 5 { // repeated pulls: each refuses it again, the log stays bounded
		r, err := s.GetMessages("T", 0, 0, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for i, b := range r.Buffers {
			if _, err := record.Verify(b); err != nil {
				t.Fatalf("served a record that fails verification: %v", err)
			}
			got = append(got, r.QueueOffsets[i])
		}
		r.Release()
		want := []int64{0, 1, 2, 4, 5, 6, 7, 8, 9}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pull served queue offsets %v, want %v", got, want)
		}
	}
	if _, err := s.MessageAt(bad.PhysicalOffset); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("MessageAt(damaged) = %v, want ErrCorrupt", err)
	}
	if _, err := s.ReadMessage(bad.PhysicalOffset); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadMessage(damaged) = %v, want ErrCorrupt", err)
	}
	if m, err := s.ReadMessage(puts[4].PhysicalOffset); err != nil || string(m.Body) != "body4" {
		t.Fatalf("neighbour: %v", err)
	}
	r, err := s.QueryByKey("T", "k3", 32, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if r.MessageCount() != 0 {
		t.Fatalf("query by key served the damaged record")
	}
	r.Release()
	r, _ = s.QueryByKey("T", "k4", 32, 0, 1<<62)
	if r.MessageCount() != 1 {
		t.Fatalf("query by key k4: %d records", r.MessageCount())
	}
	r.Release()

	if n := s.Stats().BadRecords; n != 8 { // 5 pulls, MessageAt, ReadMessage, query
		t.Fatalf("BadRecords = %d, want 8", n)
	}
	lines := strings.Count(logs.String(), "bad record not served")
	if lines != 3 { // one per read path (pull, lookup, query), the rest suppressed
		t.Fatalf("%d log lines for 8 refusals, want 3:\n%s", lines, logs.String())
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatal("refusal not logged at ERROR")
	}
	evMu.Lock()
	defer evMu.Unlock()
	corrupt := 0
	for _, ev := range events {
		if ev.Kind == EventCorruption && errors.Is(ev.Err, ErrCorrupt) {
			corrupt++
		}
	}
	if corrupt != 8 {
		t.Fatalf("%d corruption events, want 8", corrupt)
	}
}

// legacyRecords encodes n records the way SmartGo wrote them before record
// CRCs (no trailer), for queue L/0 from offset phy0.
func legacyRecords(t testing.TB, phy0 int64, n int) ([]byte, []int64) {
	t.Helper()
	var out []byte
	var phys []int64
	for i := range n {
		m := newMsg(msgSpec{topic: "L", qid: 0, body: fmt.Sprint("legacy", i), tags: "TagL"})
		m.StoreHost = bornHost
		m.QueueOffset = int64(i)
		m.PhysicalOffset = phy0 + int64(len(out))
		m.StoreTimestamp = 1_700_000_000_000
		phys = append(phys, m.PhysicalOffset)
		var err error
		if out, err = record.AppendRecord(out, m); err != nil {
			t.Fatal(err)
		}
	}
	return out, phys
}

// Records written before sealing (no CRC trailer) stay readable, across a
// restart, and are still checked by BODYCRC.
func TestStoreLegacyRecordsStayReadable(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	raw, phys := legacyRecords(t, 0, 6)
	if err := s.AppendRaw(0, raw); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	got := readAll(t, s, "L", 0)
	if len(got) != 6 || string(got[5].Body) != "legacy5" {
		t.Fatalf("legacy records after restart: %d", len(got))
	}
	for _, m := range got {
		if record.IsSealed([]byte(m.Properties)) {
			t.Fatal("legacy record reads back sealed")
		}
	}
	// New records after the legacy ones are sealed.
	pr := mustPut(t, s, msgSpec{topic: "L", qid: 0, body: "new"})
	waitDispatched(t, s)
	b := mustRaw(t, s, pr.PhysicalOffset)
	if integ, err := record.Verify(b); err != nil || integ != record.Sealed {
		t.Fatalf("new record: %v %v", integ, err)
	}
	// A legacy record whose body is damaged is refused.
	body := bytes.Index(mustRaw(t, s, phys[2]), []byte("legacy2"))
	damageAt(t, s, phys[2]+int64(body))
	r, err := s.GetMessages("L", 0, 0, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if fmt.Sprint(r.QueueOffsets) != "[0 1 3 4 5 6]" {
		t.Fatalf("pull after legacy damage: %d records, offsets %v", r.MessageCount(), r.QueueOffsets)
	}
}

// A put of a message that carries a CRC property (read back from a sealed
// record and put again, as retries are) is sealed afresh: one trailer, the
// new CRC.
func TestStoreResealsReput(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	pr := mustPut(t, s, msgSpec{topic: "A", body: "x", keys: "k"})
	m, err := s.ReadMessage(pr.PhysicalOffset)
	if err != nil {
		t.Fatal(err)
	}
	m.Topic = "B"
	if _, err := s.Put(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, s)
	got := readAll(t, s, "B", 0)
	if len(got) != 1 || strings.Count(got[0].Properties, record.PropertyCRC32) != 1 {
		t.Fatalf("re-put properties %q", got[0].Properties)
	}
	if !sealedAs(got[0].Properties, "KEYS\x01k") {
		t.Fatalf("re-put properties %q", got[0].Properties)
	}
	// A batch item carrying the property is resealed too.
	tmpl := newMsg(msgSpec{topic: "C"})
	items := []record.BatchItem{{Body: []byte("y"), Properties: []byte("A\x01a\x02__CRC32#\x010000000000\x02")}}
	if _, err := s.PutBatch(context.Background(), tmpl, items); err != nil {
		t.Fatal(err)
	}
	waitDispatched(t, s)
	got = readAll(t, s, "C", 0)
	if len(got) != 1 || !sealedAs(got[0].Properties, "A\x01a\x02") {
		t.Fatalf("batch item properties %q", got[0].Properties)
	}
}

func writeFileAt(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// shipAll copies the master's log to the slave with ReadRaw/AppendRaw in
// chunks of at most chunk bytes, as HA does.
func shipAll(t *testing.T, master, slave *Store, chunk int) {
	t.Helper()
	for off := slave.MaxPhysicalOffset(); off < master.MaxPhysicalOffset(); off = slave.MaxPhysicalOffset() {
		r, err := master.ReadRaw(off, chunk)
		if err != nil {
			t.Fatal(err)
		}
		if r.TotalBytes == 0 {
			r.Release()
			t.Fatalf("empty chunk at %d of %d", off, master.MaxPhysicalOffset())
		}
		var data []byte
		for _, b := range r.Buffers {
			data = append(data, b...)
		}
		r.Release()
		if err := slave.AppendRaw(off, data); err != nil {
			t.Fatal(err)
		}
	}
}

// Replication reads verify too: a damaged record is not shipped (zeros go
// in its place, offsets kept), the slave serves every other record, skips
// the zeros in its dispatcher and at its recovery, and chunks that end
// inside a record larger than the chunk resume where it ends.
func TestStoreReplicationSkipsDamagedRecords(t *testing.T) {
	master := openTest(t, t.TempDir(), nil)
	var puts []PutResult
	var specs []msgSpec
	for i := range 300 {
		body := fmt.Sprintf("%d-%0100d", i, i)
		if i%50 == 7 {
			body = strings.Repeat("B", 9000) // larger than a chunk
		}
		sp := msgSpec{topic: fmt.Sprint("T", i%3), qid: int32(i % 2), body: body}
		puts = append(puts, mustPut(t, master, sp))
		specs = append(specs, sp)
	}
	waitDispatched(t, master)
	bad := 120
	damageAt(t, master, puts[bad].PhysicalOffset+record.OffsetQueueID) // header: only the record CRC sees it
	slaveRoot := t.TempDir()
	slave := openTest(t, slaveRoot, nil)
	shipAll(t, master, slave, 4000)
	if master.Stats().BadRecords == 0 {
		t.Fatal("replication read of a damaged record not counted")
	}
	raw := mustRawAt(t, slave, puts[bad].PhysicalOffset, int64(puts[bad].WroteBytes))
	if !allZero(raw) {
		t.Fatal("damaged record shipped to the slave")
	}
	check := func(s *Store) {
		t.Helper()
		waitDispatched(t, s)
		for i, p := range puts {
			m, err := s.ReadMessage(p.PhysicalOffset)
			if i == bad {
				if err == nil {
					t.Fatal("slave serves the damaged record")
				}
				continue
			}
			if err != nil || string(m.Body) != specs[i].body {
				t.Fatalf("slave record %d at %d: %v", i, p.PhysicalOffset, err)
			}
			g, _ := s.GetMessages(specs[i].topic, specs[i].qid, p.QueueOffset, 1, nil)
			if g.MessageCount() != 1 || g.PhysicalOffsets[0] != p.PhysicalOffset {
				t.Fatalf("slave queue %s/%d@%d: %v %v", specs[i].topic, specs[i].qid, p.QueueOffset, g.Status, g.PhysicalOffsets)
			}
			g.Release()
		}
	}
	check(slave)
	// The zeros survive a crash of the slave: its recovery skips them.
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(slaveRoot, abortName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	slave = openTest(t, slaveRoot, nil)
	if len(slave.RecoveryReport().Skipped) != 1 {
		t.Fatalf("slave recovery skipped %v", slave.RecoveryReport().Skipped)
	}
	check(slave)
}

// mustRawAt returns n commitlog bytes at phy (through ReadRaw's mapping,
// unverified: the test looks at what is on disk).
func mustRawAt(t *testing.T, s *Store, phy, n int64) []byte {
	t.Helper()
	m := s.cl.acquireAt(phy)
	if m == nil {
		t.Fatalf("no segment at %d", phy)
	}
	defer m.release()
	return append([]byte(nil), m.data[phy-m.base:phy-m.base+n]...)
}
