package broker

import (
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A Go producer's properties stored as the broker stores them.
func BenchmarkBrokerAppendStoredProperties(b *testing.B) {
	var buf [pendingPropsLen]byte
	props := "UNIQ_KEY\x017F0000010001000000000000000000000003\x02WAIT\x01true\x02TAGS\x01tag\x02KEYS\x01k1 k2"
	b.ReportAllocs()
	for b.Loop() {
		appendStoredProperties(buf[:0], props, "DefaultCluster", "group")
	}
}

// BenchmarkBrokerSendProperties reads a producer's send header by its
// learned shape and writes its properties as stored, as a send does
// (sendOrAnswerLater): eight frames in turn (queue, born time and unique
// key change).
func BenchmarkBrokerSendProperties(b *testing.B) {
	var frames [][]byte
	for q := range 8 {
		req := protocol.NewRequest(protocol.SendMessage, &protocol.SendMessageRequestHeader{ProducerGroup: "cpu-producers", Topic: "CPU",
			DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 8, QueueID: int32(q), BornTimestamp: 1764120000000 + int64(q),
			Properties: fmt.Sprintf("UNIQ_KEY\x017F0000010001%020X\x02WAIT\x01true\x02TAGS\x01tag", q)}, make([]byte, 1024))
		req.Language, req.Version = protocol.LanguageGo, 317
		f, err := protocol.EncodeFrame(req)
		if err != nil {
			b.Fatal(err)
		}
		frames = append(frames, f)
	}
	var shapes protocol.HeaderShapes
	var ref benchRef
	raw := func(int32) bool { return true }
	work := make([]byte, len(frames[0])-4)
	b.ReportAllocs()
	var buf [pendingPropsLen]byte
	n := 0
	for b.Loop() {
		n++
		copy(work, frames[n%len(frames)][4:])
		c, err := shapes.DecodeFrame(work, &ref, raw)
		if err != nil {
			b.Fatal(err)
		}
		var h protocol.SendMessageRequestHeader
		esc, err := protocol.DecodeSendHeaderEscaped(c, &h)
		if err != nil {
			b.Fatal(err)
		}
		if esc != "" {
			appendStoredPropertiesEscaped(buf[:0], esc, "DefaultCluster", h.ProducerGroup)
		} else {
			appendStoredProperties(buf[:0], h.Properties, "DefaultCluster", h.ProducerGroup)
		}
		c.Done()
	}
}

type benchRef struct{}

func (benchRef) Unref() {}

// A Go producer's properties as its JSON header escapes them, stored as
// the broker stores them (sendOrAnswerLater's escaped path).
func BenchmarkBrokerAppendStoredPropertiesEscaped(b *testing.B) {
	var buf [pendingPropsLen]byte
	esc := `UNIQ_KEY\u00017F0000010001000000000000000000000003\u0002WAIT\u0001true\u0002TAGS\u0001tag`
	b.ReportAllocs()
	for b.Loop() {
		appendStoredPropertiesEscaped(buf[:0], esc, "DefaultCluster", "group")
	}
}
