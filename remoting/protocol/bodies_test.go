package protocol

import (
	"reflect"
	"testing"
)

func TestRemotingBodyRouteJSON(t *testing.T) {
	rd := &TopicRouteData{
		BrokerDatas: []*BrokerData{{BrokerName: "broker-a", Cluster: "DefaultCluster",
			BrokerAddrs: map[int64]string{0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}},
		QueueDatas: []*QueueData{{BrokerName: "broker-a", Perm: 6, ReadQueueNums: 4, WriteQueueNums: 4}},
	}
	b, err := EncodeJSON(rd)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],` +
		`"filterServerTable":{},` +
		`"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}`
	if string(b) != want {
		t.Fatalf("route json\n%s\nwant\n%s", b, want)
	}
	rd.OrderTopicConf = "broker-a:4"
	b, _ = EncodeJSON(rd)
	var back TopicRouteData
	if err := DecodeJSON(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.OrderTopicConf != "broker-a:4" || back.BrokerDatas[0].BrokerAddrs[1] != "10.0.0.2:10911" {
		t.Fatalf("round trip %+v", back)
	}
	// Legacy fastjson form with bare keys and unknown fields.
	legacy := `{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911", 12 :"x:1"},"brokerName":"b","cluster":"c","enableActingMaster":false}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}],"extra":{1:[1,{2:3}]}}`
	var lr TopicRouteData
	if err := DecodeJSON([]byte(legacy), &lr); err != nil {
		t.Fatal(err)
	}
	if got := lr.BrokerDatas[0].BrokerAddrs; !reflect.DeepEqual(got, map[int64]string{0: "10.0.0.1:10911", 12: "x:1"}) {
		t.Fatalf("bare keys decoded %v", got)
	}
	if b, _ := EncodeJSON(&TopicRouteData{}); string(b) != `{"brokerDatas":[],"filterServerTable":{},"queueDatas":[]}` {
		t.Fatalf("empty route %s", b)
	}
}

func TestRemotingBodyQuoteBareKeys(t *testing.T) {
	cases := map[string]string{
		`{}`:                               `{}`,
		`{"a":1}`:                          `{"a":1}`,
		`{0:"x"}`:                          `{"0":"x"}`,
		`{ -1 : 2 ,"s":"{3:4}",5:[{6:7}]}`: `{ "-1" : 2 ,"s":"{3:4}","5":[{"6":7}]}`,
		`[1,2,{x:"\"}"}]`:                  `[1,2,{"x":"\"}"}]`,
	}
	for in, want := range cases {
		if got := string(QuoteBareKeys([]byte(in))); got != want {
			t.Errorf("QuoteBareKeys(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestRemotingBodyRegisterAndOthers(t *testing.T) {
	body := RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
		DataVersion: DataVersion{Counter: 3, Timestamp: 1700000000000},
		TopicConfigTable: map[string]*TopicConfig{"T": {TopicName: "T", ReadQueueNums: 8, WriteQueueNums: 8,
			Perm: 6, TopicFilterType: TopicFilterSingleTag}},
	}}
	b, err := EncodeJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},` +
		`"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}}`
	if string(b) != want {
		t.Fatalf("register body\n%s\nwant\n%s", b, want)
	}
	pinned := map[string]any{
		`{"table":{}}`:              KVTable{},
		`{"topicList":["A","B"]}`:   TopicList{TopicList: []string{"A", "B"}},
		`{"consumerIdList":["c1"]}`: ConsumerIDList{ConsumerIDList: []string{"c1"}},
		`{"lockOKMQSet":[{"brokerName":"b","queueId":1,"topic":"T"}]}`: LockBatchResponseBody{LockOKMQSet: []*MessageQueue{{"b", 1, "T"}}},
		`{"brokerAddrTable":{"b":{"brokerAddrs":{"0":"a:1"},"brokerName":"b","cluster":"c"}},"clusterAddrTable":{"c":["b"]}}`: ClusterInfo{
			BrokerAddrTable:  map[string]*BrokerData{"b": {BrokerName: "b", Cluster: "c", BrokerAddrs: map[int64]string{0: "a:1"}}},
			ClusterAddrTable: map[string][]string{"c": {"b"}}},
		`{"offsetTable":{"T@g":{"0":5,"1":7}}}`: ConsumerOffsetSerializeWrapper{OffsetTable: map[string]map[int32]int64{"T@g": {0: 5, 1: 7}}},
		// An offset notice's body (metasync.go).
		`{"offsetTable":{"T@g":{"0":5}},"delayOffsetTable":{"1":12}}`: OffsetDelta{OffsetTable: map[string]map[int32]int64{"T@g": {0: 5}},
			DelayOffsetTable: map[int32]int64{1: 12}},
		`{}`: OffsetDelta{},
	}
	for want, v := range pinned {
		if b, err := EncodeJSON(v); err != nil || string(b) != want {
			t.Errorf("%T encodes %s (%v), want %s", v, b, err, want)
		}
	}
	var ow ConsumerOffsetSerializeWrapper
	if err := DecodeJSON([]byte(`{"offsetTable":{"T@g":{0:5,1:7}}}`), &ow); err != nil || ow.OffsetTable["T@g"][1] != 7 {
		t.Fatalf("offset wrapper %+v %v", ow, err)
	}
	hb := `{"clientID":"10.0.0.5@12345#987654321","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",` +
		`"groupName":"cg","messageModel":"CLUSTERING","unitMode":false,"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],` +
		`"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"TopicTest"}]}],` +
		`"producerDataSet":[{"groupName":"pg"},{"groupName":"CLIENT_INNER_PRODUCER"}]}`
	var h HeartbeatData
	if err := DecodeJSON([]byte(hb), &h); err != nil {
		t.Fatal(err)
	}
	if h.ClientID != "10.0.0.5@12345#987654321" || h.ConsumerDataSet[0].SubscriptionDataSet[0].CodeSet[0] != 2598919 ||
		h.ProducerDataSet[1].GroupName != "CLIENT_INNER_PRODUCER" || h.ConsumerDataSet[0].SubscriptionDataSet[0].SubVersion != 1700000000000 {
		t.Fatalf("heartbeat %+v", h)
	}
	if err := DecodeJSON([]byte(`{"clientID":`), &h); err == nil {
		t.Fatal("truncated body decoded")
	}
}
