package store

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// sealedView gives what record.Parse gives of every field the writer's
// notes read, for records sealed from messages of every shape: IPv4 and
// IPv6 hosts, no properties, properties ending with a separator or not,
// the longest topic, transaction and multi-tag flags, empty bodies.
func TestStoreSealedViewMatchesParse(t *testing.T) {
	v4 := netip.MustParseAddrPort("10.1.2.3:10911")
	v6 := netip.MustParseAddrPort("[fd00::7]:10911")
	r := rand.New(rand.NewPCG(1, 2))
	props := []string{"", "TAGS\x01a", "TAGS\x01a\x02", "KEYS\x01k1 k2\x02UNIQ_KEY\x01" + strings.Repeat("F", 32) + "\x02TAGS\x01t",
		"a\x01" + strings.Repeat("v", 3000)}
	topics := []string{"T", "%RETRY%group", strings.Repeat("t", record.MaxTopicLen)}
	for i := range 500 {
		m := &record.Message{
			Topic: topics[r.IntN(len(topics))], QueueID: r.Int32N(64), Flag: r.Int32(),
			Body:          bytes.Repeat([]byte{byte(i)}, r.IntN(3)*r.IntN(2000)),
			Properties:    props[r.IntN(len(props))],
			BornTimestamp: r.Int64(), StoreTimestamp: r.Int64N(1 << 42), QueueOffset: r.Int64N(1 << 40),
			SysFlag:        []int32{0, record.FlagMultiTags, record.TxPrepared, record.TxCommit, record.TxRollback}[r.IntN(5)],
			BornHost:       []netip.AddrPort{v4, v6}[r.IntN(2)],
			StoreHost:      []netip.AddrPort{v4, v6}[r.IntN(2)],
			ReconsumeTimes: r.Int32N(16),
		}
		rec := make([]byte, record.SealedSize(m))
		n, err := record.EncodeSealedTo(rec, m)
		if err != nil {
			t.Fatal(err)
		}
		rec = rec[:n]
		want, err := record.Parse(rec, true)
		if err != nil {
			t.Fatal(err)
		}
		var got record.View
		ok := sealedView(rec, m, &got)
		if !ok {
			t.Fatalf("message %d: no view", i)
		}
		if got.TotalSize != want.TotalSize || got.Magic != want.Magic || got.QueueID != want.QueueID ||
			got.QueueOffset != want.QueueOffset || got.StoreTimestamp != want.StoreTimestamp || got.SysFlag != want.SysFlag ||
			!bytes.Equal(got.Topic, want.Topic) || !bytes.Equal(got.Properties, want.Properties) {
			t.Fatalf("message %d: view %+v, parsed %+v", i, got, want)
		}
		// A record that is not m's: no view.
		other := *m
		other.Topic += "x"
		if len(other.Topic) <= record.MaxTopicLen {
			if ok := sealedView(rec, &other, new(record.View)); ok {
				t.Fatalf("message %d: a view for another topic's length", i)
			}
		}
	}
}
