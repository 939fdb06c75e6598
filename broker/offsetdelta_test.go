package broker

import (
	"strconv"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A slave's periodic full copy of its master's offsets can cross an
// offset notice: the master answers the copy at change n, then drains
// (n-1, n+1] into a notice, which the slave applies before it installs
// the copy. The copy sets the slave back to n; the slave must copy again
// then, not wait for a next notice that may never come (the consumers
// stopped committing) or the next periodic copy, seconds later: a
// failover meanwhile would hand the consumers offsets they had moved past.
func TestBrokerOffsetCopyOlderThanAppliedDeltaCopiesAgain(t *testing.T) {
	dir := t.TempDir()
	om, err := OpenOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	dof, err := OpenDelayOffsets(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{offsets: om, delayOffsets: dof, offsetSyncKick: make(chan struct{}, 1)}
	kicked := func() bool {
		select {
		case <-b.offsetSyncKick:
			return true
		default:
			return false
		}
	}
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
		body, err := protocol.EncodeJSON(protocol.OffsetDelta{OffsetTable: table(off).OffsetTable, DelayOffsetTable: map[int32]int64{1: 4}})
		if err != nil {
			t.Fatal(err)
		}
		req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, body)
		req.ExtFields = protocol.ExtFields{fieldNoticeScope: noticeScopeOffsets, protocol.FieldOffsetRun: run,
			protocol.FieldOffsetFrom: strconv.FormatUint(from, 10), protocol.FieldOffsetTo: strconv.FormatUint(to, 10),
			protocol.FieldDelaySeq: strconv.FormatUint(to, 10)}
		if !b.applyOffsetDelta(req) {
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
