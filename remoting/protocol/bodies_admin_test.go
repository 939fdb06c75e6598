package protocol

import (
	"reflect"
	"testing"
)

// The admin bodies in fastjson's form: keys sorted, MessageQueue-keyed
// maps with the queue object as the key (what mqadmin 4.9.8 parses).
func TestRemotingBodyAdminEncodings(t *testing.T) {
	q := func(id int32) MessageQueue { return MessageQueue{BrokerName: "b", QueueID: id, Topic: "T"} }
	cases := []struct {
		v    any
		want string
	}{
		{GroupList{}, `{"groupList":[]}`},
		{GroupList{GroupList: []string{"g1", "g2"}}, `{"groupList":["g1","g2"]}`},
		{ResetOffsetBody{OffsetTable: MQMap[int64]{{Queue: q(0), Value: 5}, {Queue: q(1), Value: 7}}},
			`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:7}}`},
		{GetConsumerStatusBody{ConsumerTable: map[string]MQMap[int64]{"c2": {{Queue: q(1), Value: 3}}, "c1": nil}},
			`{"consumerTable":{"c1":{},"c2":{{"brokerName":"b","queueId":1,"topic":"T"}:3}},"messageQueueTable":{}}`},
		{ConsumeStatsList{BrokerAddr: "a:1", TotalDiff: 4, ConsumeStatsList: []map[string][]ConsumeStats{{"g": {{ConsumeTps: 1.5,
			OffsetTable: MQMap[*OffsetWrapper]{{Queue: q(0), Value: &OffsetWrapper{BrokerOffset: 9, ConsumerOffset: 5, LastTimestamp: 2}}}}}}}},
			`{"brokerAddr":"a:1","consumeStatsList":[{"g":[{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:` +
				`{"brokerOffset":9,"consumerOffset":5,"lastTimestamp":2,"pullOffset":0}}}]}],"totalDiff":4}`},
		{BrokerStatsData{StatsMinute: BrokerStatsItem{Sum: 6, TPS: 0.1, Avgpt: 1}},
			`{"statsDay":{"avgpt":0,"sum":0,"tps":0},"statsHour":{"avgpt":0,"sum":0,"tps":0},"statsMinute":{"avgpt":1,"sum":6,"tps":0.1}}`},
		{QuerySubscriptionResponseBody{Group: "g", Topic: "T"}, `{"group":"g","topic":"T"}`},
		{ProducerTableInfo{Data: map[string][]*ProducerInfo{"pg": {{ClientID: "c", Language: "JAVA", LastUpdateTimestamp: 1, RemoteIP: "1.2.3.4:5", Version: 409}}}},
			`{"data":{"pg":[{"clientId":"c","language":"JAVA","lastUpdateTimestamp":1,"remoteIP":"1.2.3.4:5","version":409}]}}`},
	}
	for _, c := range cases {
		b, err := EncodeJSON(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%T encodes\n%s (%v)\nwant\n%s", c.v, b, err, c.want)
		}
	}
	// And they decode back.
	var st GetConsumerStatusBody
	if err := DecodeJSON([]byte(cases[3].want), &st); err != nil || len(st.ConsumerTable["c2"]) != 1 || st.ConsumerTable["c2"][0].Value != 3 {
		t.Fatalf("consumer status back: %+v %v", st, err)
	}
	var list ConsumeStatsList
	if err := DecodeJSON([]byte(cases[4].want), &list); err != nil || list.ConsumeStatsList[0]["g"][0].Lag() != 4 {
		t.Fatalf("consume stats list back: %+v %v", list, err)
	}
}

// What rocketmq-client-go answers to GET_CONSUMER_STATUS_FROM_CLIENT.
func TestRemotingBodyClientGoConsumerStatus(t *testing.T) {
	var st GetConsumerStatusBody
	if err := DecodeJSON(readVector(t, "consumer_status.json"), &st); err != nil {
		t.Fatal(err)
	}
	st.MessageQueueTable.Sort()
	got := map[int32]int64{}
	for _, e := range st.MessageQueueTable {
		if e.Queue.Topic != "CapTopic" || e.Queue.BrokerName != "broker-a" {
			t.Fatalf("queue %+v", e.Queue)
		}
		got[e.Queue.QueueID] = e.Value
	}
	if want := map[int32]int64{0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 5: 0, 6: 0, 7: 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("offsets %v, want %v", got, want)
	}
}
