package broker

import (
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// A send's topic checks and lookup (sendTarget), on one topic and on two
// in turn.
func BenchmarkBrokerSendTarget(b *testing.B) {
	br := testBroker(b, b.TempDir(), nil)
	for _, name := range []string{"BenchTopicA", "BenchTopicB"} {
		if err := br.topics.Update(protocol.TopicConfig{TopicName: name, ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRW}); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name   string
		topics []string
	}{{"one", []string{"BenchTopicA"}}, {"two", []string{"BenchTopicA", "BenchTopicB"}}} {
		b.Run(bc.name, func(b *testing.B) {
			hs := make([]protocol.SendMessageRequestHeader, len(bc.topics))
			for i, t := range bc.topics {
				hs[i].Topic = t
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, resp := br.sendTarget(&hs[i%len(hs)]); resp != nil {
					b.Fatal(resp.Remark)
				}
			}
		})
	}
}
