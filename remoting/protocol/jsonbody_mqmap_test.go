package protocol

import "testing"

// Regression: EncodeJSON of bodies holding an MQMap failed, because
// encoding/json rejects the fastjson object keys MQMap writes, so the
// broker could not answer GET_CONSUME_STATS or GET_TOPIC_STATS_INFO.
func TestProtocolEncodeJSONMQMapBodies(t *testing.T) {
	cs := ConsumeStats{ConsumeTps: 1.5, OffsetTable: MQMap[*OffsetWrapper]{
		{Queue: MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}, Value: &OffsetWrapper{BrokerOffset: 9, ConsumerOffset: 4}}}}
	for _, v := range []any{cs, &cs} {
		b, err := EncodeJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		const want = `{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":0,"pullOffset":0}}}`
		if string(b) != want {
			t.Fatalf("got %s\nwant %s", b, want)
		}
		var back ConsumeStats
		if err := DecodeJSON(b, &back); err != nil || back.Lag() != 5 {
			t.Fatalf("decode: %v lag %d", err, back.Lag())
		}
	}
	ts := TopicStatsTable{OffsetTable: MQMap[*TopicOffset]{{Queue: MessageQueue{Topic: "T", BrokerName: "b"}, Value: &TopicOffset{MaxOffset: 3}}}}
	b, err := EncodeJSON(&ts)
	if err != nil {
		t.Fatal(err)
	}
	var back TopicStatsTable
	if err := DecodeJSON(b, &back); err != nil || len(back.OffsetTable) != 1 || back.OffsetTable[0].Value.MaxOffset != 3 {
		t.Fatalf("topic stats round trip: %s %v %+v", b, err, back)
	}
}
