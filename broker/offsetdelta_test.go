package broker

import (
	"strconv"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// offsetSlave is a broker with offset tables only, as a slave applying
// its master's offsets sees them; kicked reports (and clears) a request
// for a full copy.
func offsetSlave(t *testing.T) (b *Broker, om *OffsetManager, dof *DelayOffsets, kicked func() bool) {
	t.Helper()
	dir := t.TempDir()
	om, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	dof, err = OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	b = &Broker{offsets: om, delayOffsets: dof, offsetSyncKick: make(chan struct{}, 1)}
	kicked = func() bool {
		select {
		case <-b.offsetSyncKick:
			return true
		default:
			return false
		}
	}
	return b, om, dof, kicked
}

// offsetNoticeReq is a master's offset notice of run for changes
// (from, to]: queue 0 of T@g at off, delay level 1 at delay (its change
// count to).
func offsetNoticeReq(t *testing.T, run string, from, to uint64, off, delay int64) *protocol.Command {
	t.Helper()
	body, err := protocol.EncodeJSON(protocol.OffsetDelta{OffsetTable: map[string]map[int32]int64{"T@g": {0: off}},
		DelayOffsetTable: map[int32]int64{1: delay}})
	if err != nil {
		t.Fatal(err)
	}
	req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, body)
	req.ExtFields = protocol.ExtFields{fieldNoticeScope: noticeScopeOffsets, protocol.FieldOffsetRun: run,
		protocol.FieldOffsetFrom: strconv.FormatUint(from, 10), protocol.FieldOffsetTo: strconv.FormatUint(to, 10),
		protocol.FieldDelaySeq: strconv.FormatUint(to, 10)}
	return req
}

// A slave's periodic full copy of its master's offsets can cross an
// offset notice: the master answers the copy at change n, then drains
// (n-1, n+1] into a notice, which the slave applies before it installs
// the copy. The copy sets the slave back to n; the slave must copy again
// then, not wait for a next notice that may never come (the consumers
// stopped committing) or the next periodic copy, seconds later: a
// failover meanwhile would hand the consumers offsets they had moved past.
func TestBrokerOffsetCopyOlderThanAppliedDeltaCopiesAgain(t *testing.T) {
	b, om, _, kicked := offsetSlave(t)
	const run = "77"
	table := func(off int64) protocol.ConsumerOffsetSerializeWrapper {
		return protocol.ConsumerOffsetSerializeWrapper{OffsetTable: map[string]map[int32]int64{"T@g": {0: off}}}
	}
	copyAt := func(seq uint64, off int64) {
		b.installOffsets(table(off), protocol.ExtFields{protocol.FieldOffsetRun: run, protocol.FieldOffsetSeq: strconv.FormatUint(seq, 10)})
		if err := b.installDelayOffsets([]byte(`{"offsetTable":{"1":3}}`),
			protocol.ExtFields{protocol.FieldOffsetRun: run, protocol.FieldDelaySeq: strconv.FormatUint(seq, 10)}); err != nil {
			t.Fatal(err)
		}
	}
	notice := func(from, to uint64, off int64) {
		if !b.applyOffsetDelta(offsetNoticeReq(t, run, from, to, off, 4)) {
			t.Fatalf("notice (%d, %d] not applied", from, to)
		}
	}

	copyAt(10, 5) // the first copy
	if kicked() {
		t.Fatal("a first copy asked for another")
	}
	notice(10, 12, 7)
	if off, _ := om.Query("g", "T", 0); off != 7 {
		t.Fatalf("offset %d after the notice, want 7", off)
	}
	copyAt(11, 6) // answered at 11, installed after the notice up to 12
	if !kicked() {
		t.Fatal("a copy older than the notice applied before it set the slave back (offset 6, not 7) and no new copy was asked for")
	}
	copyAt(12, 7) // the copy it asked for
	if kicked() {
		t.Fatal("a copy as new as the notices asked for another")
	}
	if off, _ := om.Query("g", "T", 0); off != 7 {
		t.Fatalf("offset %d, want 7", off)
	}
	// The delay offsets' copy alone, older than a notice's table.
	notice(12, 13, 8)
	if err := b.installDelayOffsets([]byte(`{"offsetTable":{"1":3}}`),
		protocol.ExtFields{protocol.FieldOffsetRun: run, protocol.FieldDelaySeq: "12"}); err != nil {
		t.Fatal(err)
	}
	if !kicked() {
		t.Fatal("a delay offsets copy older than a notice's table asked for no new copy")
	}
}

// Offset notices are served on the admin pool, whose workers may apply
// two notices in either order. A later notice applied first must not let
// the earlier one move an offset back: the master numbers its changes,
// and a slave applies a notice (from, to] only when it holds change
// from, so the later notice, seen first, is refused (a full copy is
// asked for) and the earlier one either applies before the copy lands or
// is ignored as older than what the slave holds.
func TestBrokerOffsetNoticesOutOfOrderNeverMoveBack(t *testing.T) {
	b, om, dof, kicked := offsetSlave(t)
	const run = "9"
	table := func(off int64) map[string]map[int32]int64 { return map[string]map[int32]int64{"T@g": {0: off}} }
	notice := func(from, to uint64, off, delay int64) *protocol.Command {
		return offsetNoticeReq(t, run, from, to, off, delay)
	}
	check := func(when string, off, delay int64) {
		t.Helper()
		if o, _ := om.Query("g", "T", 0); o != off {
			t.Fatalf("%s: offset %d, want %d", when, o, off)
		}
		if d := dof.Get(1); d != delay {
			t.Fatalf("%s: delay offset %d, want %d", when, d, delay)
		}
	}
	copyAt := func(seq uint64, off, delay int64) {
		b.installOffsets(protocol.ConsumerOffsetSerializeWrapper{OffsetTable: table(off)},
			protocol.ExtFields{protocol.FieldOffsetRun: run, protocol.FieldOffsetSeq: strconv.FormatUint(seq, 10)})
		if err := b.installDelayOffsets([]byte(`{"offsetTable":{"1":`+strconv.FormatInt(delay, 10)+`}}`),
			protocol.ExtFields{protocol.FieldOffsetRun: run, protocol.FieldDelaySeq: strconv.FormatUint(seq, 10)}); err != nil {
			t.Fatal(err)
		}
	}

	copyAt(10, 5, 1)
	kicked()
	early, late := notice(10, 12, 7, 2), notice(12, 15, 9, 3)

	// The later notice first: refused, a full copy asked for.
	if b.applyOffsetDelta(late) {
		t.Fatal("a notice (12, 15] was applied by a slave holding change 10")
	}
	check("after the later notice", 5, 1)
	// The earlier one then applies: the offsets move forward only.
	if !b.applyOffsetDelta(early) {
		t.Fatal("the notice (10, 12] was refused by a slave holding change 10")
	}
	check("after the earlier notice", 7, 2)
	// The copy the refused notice asked for lands.
	copyAt(15, 9, 3)
	if kicked() {
		t.Fatal("a copy as new as every notice asked for another")
	}
	check("after the copy", 9, 3)
	// Either notice again, late: ignored, nothing moves back.
	for _, n := range []*protocol.Command{early, late} {
		if !b.applyOffsetDelta(n) {
			t.Fatal("an old notice asked for a full copy")
		}
		check("after an old notice", 9, 3)
	}

	// The copy landing before the earlier notice is served.
	early, late = notice(15, 17, 11, 4), notice(17, 20, 13, 5)
	if b.applyOffsetDelta(late) {
		t.Fatal("a notice (17, 20] was applied by a slave holding change 15")
	}
	copyAt(20, 13, 5)
	if !b.applyOffsetDelta(early) {
		t.Fatal("an old notice asked for a full copy")
	}
	check("after the earlier notice, served after the copy", 13, 5)
}
