package broker

import "testing"

// A Go producer's properties stored as the broker stores them.
func BenchmarkBrokerAppendStoredProperties(b *testing.B) {
	var buf [pendingPropsLen]byte
	props := "UNIQ_KEY\x017F0000010001000000000000000000000003\x02WAIT\x01true\x02TAGS\x01tag\x02KEYS\x01k1 k2"
	b.ReportAllocs()
	for b.Loop() {
		appendStoredProperties(buf[:0], props, "DefaultCluster", "group")
	}
}
