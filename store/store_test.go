package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

func TestStorePutGetAcrossSegments(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	topics := []string{"TopicA", "TopicB", "%RETRY%cg"}
	want := map[cqKey][]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		tp := topics[rng.IntN(len(topics))]
		q := int32(rng.IntN(4))
		body := fmt.Sprintf("m%05d-%s", i, strings.Repeat("x", rng.IntN(400)))
		r := mustPut(t, s, msgSpec{topic: tp, qid: q, body: body})
		k := cqKey{tp, q}
		if r.QueueOffset != int64(len(want[k])) {
			t.Fatalf("queue offset %d, want %d", r.QueueOffset, len(want[k]))
		}
		want[k] = append(want[k], body)
	}
	if n := len(segmentFiles(t, root)); n < 10 {
		t.Fatalf("only %d segments; test must cross boundaries", n)
	}
	waitDispatched(t, s)
	for k, bodies := range want {
		got := readAll(t, s, k.topic, k.queueID)
		if len(got) != len(bodies) {
			t.Fatalf("%v: %d messages, want %d", k, len(got), len(bodies))
		}
		for i := range got {
			if string(got[i].Body) != bodies[i] || got[i].Topic != k.topic || got[i].QueueID != k.queueID {
				t.Fatalf("%v[%d]: got %q", k, i, got[i].Body)
			}
		}
	}
	// Every segment but the last ends with a filler.
	for _, m := range s.cl.list()[:len(s.cl.list())-1] {
		if err := verifySegmentTiles(m); err != nil {
			t.Fatal(err)
		}
	}
}

// verifySegmentTiles walks a full segment: records then exactly one filler.
func verifySegmentTiles(m *mappedFile) error {
	for rel := int64(0); rel < m.size; {
		size, magic, err := record.PeekHeader(m.data[rel:])
		if err != nil {
			return err
		}
		if magic == record.MagicBlank {
			if int64(size) != m.size-rel || size < 8 {
				return fmt.Errorf("%s: filler %d at %d", m.path, size, rel)
			}
			return nil
		}
		if _, err := record.Parse(m.data[rel:rel+int64(size)], true); err != nil {
			return fmt.Errorf("%s at %d: %w", m.path, rel, err)
		}
		rel += int64(size)
	}
	return fmt.Errorf("%s: no filler", m.path)
}

func TestStoreGetStatuses(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	ctx := context.Background()
	_ = ctx
	r, err := s.GetMessages("none", 0, 0, 32, nil)
	if err != nil || r.Status != GetNoMatchedLogicQueue {
		t.Fatalf("unknown queue: %v %v", r.Status, err)
	}
	r.Release()
	for i := range 10 {
		mustPut(t, s, msgSpec{topic: "T", qid: 1, body: fmt.Sprint(i)})
	}
	waitDispatched(t, s)
	cases := []struct {
		off    int64
		status GetStatus
		next   int64
	}{
		{10, GetOffsetOverflowOne, 10},
		{11, GetOffsetOverflowBadly, 10},
		{3, GetFound, 10},
	}
	for _, c := range cases {
		r, _ := s.GetMessages("T", 1, c.off, 32, nil)
		if r.Status != c.status || r.NextBeginOffset != c.next || r.MinOffset != 0 || r.MaxOffset != 10 {
			t.Errorf("offset %d: %v next %d min %d max %d", c.off, r.Status, r.NextBeginOffset, r.MinOffset, r.MaxOffset)
		}
		r.Release()
	}
	r, _ = s.GetMessages("T", 1, 0, 4, nil)
	if r.MessageCount() != 4 || r.NextBeginOffset != 4 {
		t.Fatalf("maxMsgs 4: %d next %d", r.MessageCount(), r.NextBeginOffset)
	}
	r.Release()
}

func TestStoreTagFilter(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	for i := range 100 {
		tag := []string{"TagA", "TagB", ""}[i%3]
		mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprint(i), tags: tag})
	}
	waitDispatched(t, s)
	set := TagSet{record.TagsHash("TagB")}
	var got []string
	off := int64(0)
	for off < 100 {
		r, _ := s.GetMessages("T", 0, off, 32, set.Match)
		if r.Status != GetFound && r.Status != GetNoMatchedMessage {
			t.Fatalf("status %v", r.Status)
		}
		for _, b := range r.Buffers {
			m, _, err := record.Decode(b, true)
			if err != nil {
				t.Fatal(err)
			}
			if tg, _ := record.LookupPropertyString(m.Properties, record.PropertyTags); tg != "TagB" {
				t.Fatalf("filter let through tag %q", tg)
			}
			got = append(got, string(m.Body))
		}
		off = r.NextBeginOffset
		r.Release()
	}
	if len(got) != 33 {
		t.Fatalf("%d TagB messages, want 33", len(got))
	}
	// A filter matching nothing scans and reports NO_MATCHED_MESSAGE.
	r, _ := s.GetMessages("T", 0, 0, 32, func(int64) bool { return false })
	if r.Status != GetNoMatchedMessage || r.NextBeginOffset != 100 {
		t.Fatalf("no match: %v next %d", r.Status, r.NextBeginOffset)
	}
	r.Release()
}

// A record filter sees only what the tag filter let through, and what it
// rejects is skipped without ending the scan.
func TestStoreRecordFilter(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	for i := range 90 {
		tag := []string{"TagA", "TagB", ""}[i%3]
		mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprint(i), tags: tag})
	}
	waitDispatched(t, s)
	set := TagSet{record.TagsHash("TagA")}
	seen := 0
	evenBody := func(rec []byte) bool {
		seen++
		v, err := record.Parse(rec, false)
		if err != nil {
			t.Fatal(err)
		}
		if tg, _ := record.LookupProperty(v.Properties, record.PropertyTags); string(tg) != "TagA" {
			t.Fatalf("record filter saw tag %q the tag filter rejects", tg)
		}
		n, _ := strconv.Atoi(string(v.Body))
		return n%2 == 0
	}
	var got []string
	for off := int64(0); off < 90; {
		r, err := s.GetMessagesFiltered("T", 0, off, 32, set.Match, evenBody)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Buffers {
			v, _ := record.Parse(b, false)
			got = append(got, string(v.Body))
		}
		off = r.NextBeginOffset
		r.Release()
	}
	// TagA is every third message from 0; of those the even ones: 0, 6, 12, ... 84.
	if len(got) != 15 || got[0] != "0" || got[14] != "84" || seen != 30 {
		t.Fatalf("got %v after %d record checks", got, seen)
	}
}

func TestStoreBatchLimits(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.SegmentSize = 1 << 20 })
	body := strings.Repeat("b", 10_000)
	for range 40 {
		mustPut(t, s, msgSpec{topic: "T", qid: 0, body: body})
	}
	waitDispatched(t, s)
	r, _ := s.GetMessages("T", 0, 0, 64, nil)
	defer r.Release()
	if r.TotalBytes > MaxBytesInMemory || r.MessageCount() >= 32 || r.MessageCount() < 20 {
		t.Fatalf("batch of %d messages, %d bytes", r.MessageCount(), r.TotalBytes)
	}
}

func TestStoreQueryByKey(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock })
	for i := range 500 { // spans several index files (200 entries each)
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		mustPut(t, s, msgSpec{topic: "T", qid: int32(i % 2), body: fmt.Sprint(i),
			keys: fmt.Sprintf("order-%d common", i%50), uniq: fmt.Sprintf("UNIQ%04d", i)})
	}
	mustPut(t, s, msgSpec{topic: "Other", body: "x", keys: "order-7"})
	waitIndexed(t, s)
	if n := len(s.idx.list()); n < 3 {
		t.Fatalf("%d index files, want >= 3", n)
	}
	r, err := s.QueryByKey("T", "order-7", 32, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if r.MessageCount() != 10 {
		t.Fatalf("order-7: %d messages, want 10", r.MessageCount())
	}
	for _, b := range r.Buffers {
		m, _, _ := record.Decode(b, true)
		if m.Topic != "T" || !strings.Contains(m.Properties, "order-7 ") {
			t.Fatalf("wrong match %s %q", m.Topic, m.Properties)
		}
	}
	if r.IndexLastUpdatePhyOffset == 0 || r.IndexLastUpdateTimestamp == 0 {
		t.Fatal("index last update not reported")
	}
	r.Release()
	r, _ = s.QueryByKey("T", "UNIQ0123", 32, 0, 1<<62)
	if r.MessageCount() != 1 {
		t.Fatalf("uniq: %d", r.MessageCount())
	}
	r.Release()
	// Time range: messages i in [100, 109] were stored at base+101s..base+110s.
	base := int64(1_700_000_000_000)
	r, _ = s.QueryByKey("T", "common", 64, base+101_000, base+110_000)
	if r.MessageCount() != 10 {
		t.Fatalf("time range: %d messages, want 10", r.MessageCount())
	}
	r.Release()
	r, _ = s.QueryByKey("T", "common", 5, 0, 1<<62)
	if r.MessageCount() != 5 {
		t.Fatalf("max 5: %d", r.MessageCount())
	}
	r.Release()
}

func TestStoreOffsetByTime(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock })
	for i := range 1000 {
		mu.Lock()
		now = time.UnixMilli(1_700_000_000_000 + int64(i)*10)
		mu.Unlock()
		mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprint(i)})
	}
	waitDispatched(t, s)
	for _, c := range []struct{ ts, want int64 }{
		{0, 0}, {1_700_000_000_000, 0}, {1_700_000_000_005, 1}, {1_700_000_005_000, 500},
		{1_700_000_009_990, 999}, {1_700_000_009_991, 1000},
	} {
		if got := s.OffsetByTime("T", 0, c.ts); got != c.want {
			t.Errorf("OffsetByTime(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
	if ts, ok := s.EarliestStoreTime("T", 0); !ok || ts != 1_700_000_000_000 {
		t.Errorf("EarliestStoreTime = %d %v", ts, ok)
	}
	if ts, ok := s.EarliestMessageTime(); !ok || ts != 1_700_000_000_000 {
		t.Errorf("EarliestMessageTime = %d %v", ts, ok)
	}
}

func TestStoreMessageAt(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	var rs []PutResult
	for i := range 50 {
		rs = append(rs, mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprint(i)}))
	}
	for i, pr := range rs {
		m, err := s.ReadMessage(pr.PhysicalOffset)
		if err != nil || string(m.Body) != fmt.Sprint(i) || m.PhysicalOffset != pr.PhysicalOffset || m.StoreTimestamp != pr.StoreTimestamp {
			t.Fatalf("ReadMessage(%d): %v %v", pr.PhysicalOffset, m, err)
		}
		host, off, err := record.ParseOffsetMessageID(pr.MsgID())
		if err != nil || off != pr.PhysicalOffset || host != s.opts.StoreHost {
			t.Fatalf("msg id %s: %v %d %v", pr.MsgID(), host, off, err)
		}
	}
	for _, bad := range []int64{-1, rs[0].PhysicalOffset + 1, s.MaxPhysicalOffset(), 1 << 40} {
		if _, err := s.MessageAt(bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("MessageAt(%d): %v", bad, err)
		}
	}
}

func TestStoreTransactions(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	m := newMsg(msgSpec{topic: "T", body: "half", keys: "kp"})
	m.SysFlag = record.TxPrepared
	r, err := s.Put(context.Background(), m)
	if err != nil || r.QueueOffset != 0 {
		t.Fatal(r, err)
	}
	rb := newMsg(msgSpec{topic: "T", body: "rollback", keys: "kr"})
	rb.SysFlag = record.TxRollback
	if _, err := s.Put(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	cm := newMsg(msgSpec{topic: "T", body: "commit", keys: "kc"})
	cm.SysFlag = record.TxCommit
	if r, err := s.Put(context.Background(), cm); err != nil || r.QueueOffset != 0 {
		t.Fatal(r, err)
	}
	waitDispatched(t, s)
	got := readAll(t, s, "T", 0)
	if len(got) != 1 || string(got[0].Body) != "commit" {
		t.Fatalf("queue holds %d messages", len(got))
	}
	for key, want := range map[string]int{"kp": 1, "kr": 0, "kc": 1} {
		r, _ := s.QueryByKey("T", key, 32, 0, 1<<62)
		if r.MessageCount() != want {
			t.Errorf("key %s: %d results, want %d", key, r.MessageCount(), want)
		}
		r.Release()
	}
}

func TestStorePutBatch(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	mustPut(t, s, msgSpec{topic: "B", qid: 2, body: "first"})
	tmpl := newMsg(msgSpec{topic: "B", qid: 2})
	tmpl.Properties = "WAIT\x01true"
	var items []record.BatchItem
	for i := range 20 {
		items = append(items, record.BatchItem{Flag: int32(i), Body: []byte(fmt.Sprint("item", i)),
			Properties: []byte("UNIQ_KEY\x01U" + fmt.Sprint(i))})
	}
	res, err := s.PutBatch(context.Background(), tmpl, items)
	if err != nil || res.Status != PutOK || res.QueueOffset != 1 || res.MsgCount != 20 || len(res.PhysicalOffsets) != 20 {
		t.Fatalf("PutBatch: %+v %v", res, err)
	}
	waitDispatched(t, s)
	got := readAll(t, s, "B", 2)
	if len(got) != 21 {
		t.Fatalf("%d messages", len(got))
	}
	for i, m := range got[1:] {
		if string(m.Body) != fmt.Sprint("item", i) || m.Flag != int32(i) || m.QueueOffset != int64(i+1) {
			t.Fatalf("item %d: %+v", i, m)
		}
		if !sealedAs(m.Properties, fmt.Sprintf("UNIQ_KEY\x01U%d\x02WAIT\x01true", i)) {
			t.Fatalf("item %d properties %q", i, m.Properties)
		}
	}
	big := []record.BatchItem{{Body: make([]byte, 20<<10)}}
	if _, err := s.PutBatch(context.Background(), tmpl, big); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized batch item: %v", err)
	}
}

// TestStorePutIPv6StoreHost: records are sized with the store's own host,
// which is 12 bytes wider as IPv6 than the zero host a sender leaves.
func TestStorePutIPv6StoreHost(t *testing.T) {
	host := netip.MustParseAddrPort("[2001:db8::1]:10911")
	s := openTest(t, t.TempDir(), func(o *Options) { o.StoreHost = host })
	if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "V6", body: "single"})); err != nil {
		t.Fatalf("Put: %v", err)
	}
	tmpl := newMsg(msgSpec{topic: "V6"})
	res, err := s.PutBatch(context.Background(), tmpl, []record.BatchItem{{Body: []byte("b0")}, {Body: []byte("b1")}})
	if err != nil || res.MsgCount != 2 {
		t.Fatalf("PutBatch: %+v %v", res, err)
	}
	waitDispatched(t, s)
	got := readAll(t, s, "V6", 0)
	if len(got) != 3 {
		t.Fatalf("%d messages", len(got))
	}
	for i, m := range got {
		if m.StoreHost != host || string(m.Body) != []string{"single", "b0", "b1"}[i] {
			t.Errorf("message %d: host %v body %q", i, m.StoreHost, m.Body)
		}
	}
}

// TestStoreAsyncWriteModes: in every FlushAsync write mode a put, single
// or batched, is in the page cache and readable when Put or PutBatch
// returns (nothing waits in the write-behind buffer), and mixing mapped
// single puts with pwritten batches (hybrid) keeps the log contiguous.
func TestStoreAsyncWriteModes(t *testing.T) {
	for _, mode := range []AsyncWriteMode{AsyncWriteHybrid, AsyncWriteMapped, AsyncWritePwrite} {
		mapped := mode
		dir := t.TempDir()
		s := openTest(t, dir, func(o *Options) { o.FlushMode, o.AsyncWrites = FlushAsync, mode })
		if s.cl.pwrite != (mode == AsyncWritePwrite) || s.cl.prefault == (mode == AsyncWritePwrite) || s.cl.batchPwrite != (mode == AsyncWriteHybrid) {
			t.Fatalf("%v: pwrite=%v prefault=%v batchPwrite=%v", mode, s.cl.pwrite, s.cl.prefault, s.cl.batchPwrite)
		}
		ctx := context.Background()
		for i := range 50 {
			res, err := s.Put(ctx, newMsg(msgSpec{topic: "W", body: fmt.Sprint("single", i)}))
			if err != nil {
				t.Fatal(err)
			}
			if m, err := s.ReadMessage(res.PhysicalOffset); err != nil || string(m.Body) != fmt.Sprint("single", i) {
				t.Fatalf("%v: read back put %d: %v", mapped, i, err)
			}
			items := []record.BatchItem{{Body: []byte(fmt.Sprint("a", i))}, {Body: []byte(fmt.Sprint("b", i))}}
			br, err := s.PutBatch(ctx, newMsg(msgSpec{topic: "W"}), items)
			if err != nil {
				t.Fatal(err)
			}
			for j, phy := range br.PhysicalOffsets {
				if m, err := s.ReadMessage(phy); err != nil || string(m.Body) != string(items[j].Body) {
					t.Fatalf("%v: read back batch %d item %d: %v", mapped, i, j, err)
				}
			}
			if c, a := s.cl.committed.Load(), s.cl.appended.Load(); c != a {
				t.Fatalf("%v: committed %d, appended %d after a put", mapped, c, a)
			}
		}
		// Reopen: recovery walks all 150 records, in order, from the files.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTest(t, dir, nil)
		if got := s.MaxOffset("W", 0); got != 150 {
			t.Fatalf("%v: %d records in queue W/0 after reopen, want 150", mode, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStoreHybridWrites: with AsyncWriteHybrid a single put goes through
// the mapping unless a batch was put within hybridWindow; then it takes
// the pwrite path too (pend is used only by pwrites).
func TestStoreHybridWrites(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode, o.AsyncWrites = FlushAsync, AsyncWriteHybrid
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	ctx := context.Background()
	usedPend := func() bool {
		s.putMu.Lock()
		defer s.putMu.Unlock()
		used := cap(s.cl.pend) > 0
		s.cl.pend = nil
		return used
	}
	single := func(body string) {
		t.Helper()
		res, err := s.Put(ctx, newMsg(msgSpec{topic: "H", body: body}))
		if err != nil {
			t.Fatal(err)
		}
		if m, err := s.ReadMessage(res.PhysicalOffset); err != nil || string(m.Body) != body {
			t.Fatalf("read back %q: %v", body, err)
		}
	}
	single("first")
	if usedPend() {
		t.Fatal("a single put before any batch took the pwrite path")
	}
	if _, err := s.PutBatch(ctx, newMsg(msgSpec{topic: "H"}), []record.BatchItem{{Body: []byte("b0")}, {Body: []byte("b1")}}); err != nil {
		t.Fatal(err)
	}
	if !usedPend() {
		t.Fatal("a batch did not take the pwrite path")
	}
	clock.Add(int64(hybridWindow / 2))
	single("near")
	if !usedPend() {
		t.Fatal("a single put right after a batch went through the mapping")
	}
	clock.Add(int64(2 * hybridWindow))
	single("later")
	if usedPend() {
		t.Fatal("a single put long after the last batch took the pwrite path")
	}
	// Both paths feed one log: the dispatcher indexes all five records.
	deadline := time.Now().Add(5 * time.Second)
	for s.MaxOffset("H", 0) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("queue H/0 holds %d records, want 5", s.MaxOffset("H", 0))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestStorePutBatchProperties: each record's properties are the item's,
// a separator unless the item's end with one, then the template's.
func TestStorePutBatchProperties(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	cases := []struct{ item, tmpl, want string }{
		{"A\x01a", "T\x01t", "A\x01a\x02T\x01t"},
		{"A\x01a\x02", "T\x01t", "A\x01a\x02T\x01t"},
		{"", "T\x01t", "T\x01t"},
		{"A\x01a", "", "A\x01a"},
		{"", "", ""},
		{strings.Repeat("K\x01v\x02", 300), "T\x01t", strings.Repeat("K\x01v\x02", 300) + "T\x01t"},
	}
	for i, c := range cases {
		tmpl := newMsg(msgSpec{topic: "P", qid: int32(i)})
		tmpl.Properties = c.tmpl
		// Two items: the second must not see the first's properties.
		items := []record.BatchItem{{Body: []byte("x"), Properties: []byte(c.item)}, {Body: []byte("y")}}
		if _, err := s.PutBatch(context.Background(), tmpl, items); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		waitDispatched(t, s)
		got := readAll(t, s, "P", int32(i))
		if len(got) != 2 || !sealedAs(got[0].Properties, c.want) || !sealedAs(got[1].Properties, c.tmpl) {
			for _, m := range got {
				t.Logf("properties %q", m.Properties)
			}
			t.Fatalf("case %d: %d records, want %q then %q", i, len(got), c.want, c.tmpl)
		}
	}
}

// TestStorePutBatchAllocs: a batch costs a fixed number of allocations,
// not one or more per record.
func TestStorePutBatchAllocs(t *testing.T) {
	// Files large enough that neither the writer nor the dispatcher,
	// whose allocations count too, creates new ones during the
	// measurement (a segment roll allocates a dozen objects).
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode, o.CQEntriesPerFile, o.IndexSlots, o.IndexEntries = FlushAsync, 1<<16, 1<<10, 1<<16
		o.SegmentSize = 16 << 20
		// No periodic flush, checkpoint or retention pass during the
		// measurement: their allocations are not the batch's.
		o.FlushInterval, o.LogicFlushInterval, o.IndexFlushInterval, o.CleanInterval = time.Hour, time.Hour, time.Hour, time.Hour
	})
	tmpl := newMsg(msgSpec{topic: "A"})
	tmpl.Properties = "CLUSTER\x01c"
	items := make([]record.BatchItem, 64)
	for i := range items {
		items[i] = record.BatchItem{Body: make([]byte, 128), Properties: []byte("UNIQ_KEY\x01AAAABBBBCCCCDDDDEEEEFFFF00001111\x02WAIT\x01true")}
	}
	ctx := context.Background()
	a := testing.AllocsPerRun(50, func() {
		if _, err := s.PutBatch(ctx, tmpl, items); err != nil {
			t.Fatal(err)
		}
	})
	// One for the offsets; the rest is slack for background goroutines
	// (flushers, dispatcher), whose allocations AllocsPerRun counts too.
	if a > 8 {
		t.Errorf("PutBatch of %d items: %.1f allocations, want <= 8", len(items), a)
	}
}

// TestStorePutAsyncAllocs: a put written behind, as a broker's send makes
// it, allocates nothing of its own (the callback state is a struct in a
// reused slice), and neither does the dispatcher answering it.
func TestStorePutAsyncAllocs(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode, o.CQEntriesPerFile, o.IndexSlots, o.IndexEntries = FlushAsync, 1<<16, 1<<10, 1<<16
	})
	m := newMsg(msgSpec{topic: "A", body: string(make([]byte, 1024)), uniq: "AAAABBBBCCCCDDDDEEEEFFFF00001111", tags: "t"})
	put := new(record.Message)
	var answered atomic.Int64
	done := func(_ PutResult, err error) {
		if err != nil {
			t.Error(err)
		}
		answered.Add(1)
	}
	var pendings int64
	a := testing.AllocsPerRun(200, func() {
		*put = *m
		_, pending, err := s.PutAsync(put, true, done)
		if err != nil {
			t.Fatal(err)
		}
		if pending {
			pendings++
		}
	})
	if pendings == 0 {
		t.Fatal("no put was written behind")
	}
	// Slack for the background goroutines, whose allocations AllocsPerRun
	// counts too.
	if a > 0.5 {
		t.Errorf("PutAsync: %.2f allocations per put, want none", a)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := answered.Load(); got != pendings {
			return fmt.Errorf("%d of %d answered", got, pendings)
		}
		return nil
	})
}

func TestStoreArrivalCallback(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	type ev struct {
		topic string
		q     int32
		max   int64
	}
	ch := make(chan ev, 100)
	s.OnArrival(func(topic string, q int32, max int64) { ch <- ev{topic, q, max} })
	mustPut(t, s, msgSpec{topic: "T", qid: 3, body: "x"})
	select {
	case e := <-ch:
		if e.topic != "T" || e.q != 3 || e.max != 1 {
			t.Fatalf("arrival %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no arrival callback")
	}
}

func TestStoreRestartKeepsOffsets(t *testing.T) {
	root := t.TempDir()
	s, err := Open(testOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		mustPut(t, s, msgSpec{topic: "T", qid: int32(i % 3), body: fmt.Sprint(i), keys: fmt.Sprint("k", i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T"})); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	s2 := openTest(t, root, nil)
	rep := s2.RecoveryReport()
	if rep.Abnormal || rep.Err() != nil || !rep.CheckpointValid {
		t.Fatalf("clean restart report: %+v", rep)
	}
	for q := range int32(3) {
		if got := s2.MaxOffset("T", q); got != int64(len(readAll(t, s2, "T", q))) || got < 166 {
			t.Fatalf("queue %d max %d", q, got)
		}
	}
	r := mustPut(t, s2, msgSpec{topic: "T", qid: 0, body: "after"})
	if r.QueueOffset != 167 {
		t.Fatalf("queue offset after restart %d", r.QueueOffset)
	}
	waitDispatched(t, s2)
	q, _ := s2.QueryByKey("T", "k42", 32, 0, 1<<62)
	if q.MessageCount() != 1 {
		t.Fatalf("index after restart: %d", q.MessageCount())
	}
	q.Release()
}
