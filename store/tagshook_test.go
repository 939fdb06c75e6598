package store

import (
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// A TagsCode hook's value depends on the owner's configuration (the
// broker's schedule topic: store time plus the level's delay, from
// broker.delay_levels). Reopened after a clean close with a hook that now
// gives other codes, the store finds no damage in the consume queues the
// first hook wrote, and re-dispatches nothing.
func TestStoreTagsHookChangedIsNotDamage(t *testing.T) {
	root := t.TempDir()
	hook := func(delay int64) func([]byte, []byte, int64) (int64, bool) {
		return func(topic, props []byte, ts int64) (int64, bool) {
			if string(topic) != "SCHED" {
				return 0, false
			}
			return ts + delay, true
		}
	}
	s := openTest(t, root, func(o *Options) { o.TagsCode = hook(3_600_000) })
	for i := range 20 {
		m := newMsg(msgSpec{topic: "SCHED", qid: int32(i % 2), body: fmt.Sprint("m", i), tags: "t"})
		m.Properties += record.PropertyDelayLevel + "\x015\x02"
		if _, err := s.Put(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, func(o *Options) { o.TagsCode = hook(2000) })
	rep := s.RecoveryReport()
	if len(rep.Corruptions) != 0 || rep.Redispatched != 0 {
		t.Fatalf("reopened with another hook: %d corruptions (%v), %d records re-dispatched", len(rep.Corruptions), rep.Corruptions, rep.Redispatched)
	}
	for q := range int32(2) {
		res, err := s.GetMessages("SCHED", q, 0, 32, nil)
		if err != nil || len(res.Buffers) != 10 {
			t.Fatalf("queue %d: %v", q, err)
		}
		res.Release()
	}
	if n := s.Stats().BadRecords; n != 0 {
		t.Fatalf("%d bad records reading the queues", n)
	}
}
