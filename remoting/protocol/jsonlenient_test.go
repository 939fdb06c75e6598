package protocol

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "clientgo", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The heartbeat of a rocketmq-client-go push consumer with a tag
// expression carries its codeSet as JSON strings; it must decode to the
// Java hash codes of its tags.
func TestRemotingBodyClientGoHeartbeatCodeSetStrings(t *testing.T) {
	var hb HeartbeatData
	if err := DecodeJSON(readVector(t, "heartbeat_consumer_tags.json"), &hb); err != nil {
		t.Fatalf("decode client-go heartbeat: %v", err)
	}
	if hb.ClientID != "192.0.2.2@cap-cons" || len(hb.ConsumerDataSet) != 1 || len(hb.ProducerDataSet) != 0 {
		t.Fatalf("heartbeat %+v", hb)
	}
	cd := hb.ConsumerDataSet[0]
	if cd.GroupName != "cap-cg" || cd.ConsumeType != ConsumePassively || cd.MessageModel != MessageModelClustering ||
		cd.ConsumeFromWhere != ConsumeFromFirstOffset || len(cd.SubscriptionDataSet) != 2 {
		t.Fatalf("consumer data %+v", cd)
	}
	sd := cd.SubscriptionDataSet[0]
	want := []int32{int32(record.TagsHash("TagA")), int32(record.TagsHash("TagB"))}
	if sd.Topic != "CapTopic" || sd.SubString != "TagA || TagB" || !reflect.DeepEqual(sd.TagsSet, []string{"TagA", "TagB"}) ||
		!reflect.DeepEqual(sd.CodeSet, want) || sd.SubVersion != 1795633163897975178 || sd.ExpressionType != ExpressionTypeTag {
		t.Fatalf("subscription %+v, want codes %v", sd, want)
	}
	if r := cd.SubscriptionDataSet[1]; r.Topic != "%RETRY%cap-cg" || r.SubString != "*" || len(r.CodeSet) != 0 {
		t.Fatalf("retry subscription %+v", r)
	}

	var one HeartbeatData
	if err := DecodeJSON(readVector(t, "heartbeat_consumer_single_tag.json"), &one); err != nil {
		t.Fatal(err)
	}
	if s := one.ConsumerDataSet[0].SubscriptionDataSet[1]; s.SubString != "TagC" || !reflect.DeepEqual(s.CodeSet, []int32{int32(record.TagsHash("TagC"))}) {
		t.Fatalf("single tag subscription %+v", s)
	}
	var prod HeartbeatData
	if err := DecodeJSON(readVector(t, "heartbeat_producer.json"), &prod); err != nil || prod.ProducerDataSet[0].GroupName != "cap-pg" {
		t.Fatalf("producer heartbeat %+v %v", prod, err)
	}
}

func TestRemotingBodyClientGoLockBatch(t *testing.T) {
	var lb LockBatchRequestBody
	if err := DecodeJSON(readVector(t, "lock_batch.json"), &lb); err != nil {
		t.Fatal(err)
	}
	if lb.ConsumerGroup != "cap-ocg" || lb.ClientID != "192.0.2.2@cap-ocons" ||
		!reflect.DeepEqual(lb.MQSet, []*MessageQueue{{BrokerName: "broker-a", QueueID: 7, Topic: "CapTopic"}}) {
		t.Fatalf("lock body %+v", lb)
	}
	var ub UnlockBatchRequestBody
	if err := DecodeJSON(readVector(t, "unlock_batch.json"), &ub); err != nil || len(ub.MQSet) != 8 || ub.MQSet[3].QueueID != 6 || ub.MQSet[1].QueueID != 4 {
		t.Fatalf("unlock body %+v %v", ub, err)
	}
}

// fastjson converts scalars to the field's type; so does DecodeJSON.
func TestRemotingBodyLenientScalars(t *testing.T) {
	var g SubscriptionGroupConfig
	in := `{"groupName":123,"retryMaxTimes":"16","retryQueueNums":" 1 ","brokerId":"0","whichBrokerWhenConsumeSlowly":1.0,` +
		`"consumeEnable":"true","consumeBroadcastEnable":1,"consumeFromMinEnable":"false","notifyConsumerIdsChangedEnable":"Y"}`
	if err := DecodeJSON([]byte(in), &g); err != nil {
		t.Fatal(err)
	}
	want := SubscriptionGroupConfig{GroupName: "123", RetryMaxTimes: 16, RetryQueueNums: 1, WhichBrokerWhenConsumeSlowly: 1,
		ConsumeEnable: true, ConsumeBroadcastEnable: true, NotifyConsumerIdsChangedEnable: true}
	if g != want {
		t.Fatalf("group %+v\nwant  %+v", g, want)
	}

	var ow ConsumerOffsetSerializeWrapper
	if err := DecodeJSON([]byte(`{"offsetTable":{"T@g":{0:"5","1":"1e1"}}}`), &ow); err != nil ||
		!reflect.DeepEqual(ow.OffsetTable["T@g"], map[int32]int64{0: 5, 1: 10}) {
		t.Fatalf("offsets %+v %v", ow, err)
	}
	var tw TopicConfigSerializeWrapper
	if err := DecodeJSON([]byte(`{"dataVersion":{"counter":"3","timestamp":"1700000000000"},"topicConfigTable":{"T":{"topicName":"T",`+
		`"readQueueNums":"8","writeQueueNums":8,"perm":"6","order":"true","topicSysFlag":""}}}`), &tw); err != nil {
		t.Fatal(err)
	}
	if tc := tw.TopicConfigTable["T"]; tw.DataVersion.Counter != 3 || tc.ReadQueueNums != 8 || tc.Perm != 6 || !tc.Order || tc.TopicSysFlag != 0 {
		t.Fatalf("topic config %+v %+v", tw, tc)
	}
	var kv KVTable
	if err := DecodeJSON([]byte(`{"table":{"a":1,"b":true,"c":"x"}}`), &kv); err != nil ||
		!reflect.DeepEqual(kv.Table, map[string]string{"a": "1", "b": "true", "c": "x"}) {
		t.Fatalf("kv %+v %v", kv, err)
	}
	var ids ConsumerIDList
	if err := DecodeJSON([]byte(`{"consumerIdList":[1,"c2"]}`), &ids); err != nil || !reflect.DeepEqual(ids.ConsumerIDList, []string{"1", "c2"}) {
		t.Fatalf("ids %+v %v", ids, err)
	}
	var lb LockBatchRequestBody
	if err := DecodeJSON([]byte(`{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"T","brokerName":"b","queueId":"3"}],"onlyThisBroker":"true"}`), &lb); err != nil ||
		lb.MQSet[0].QueueID != 3 || !lb.OnlyThisBroker {
		t.Fatalf("lock %+v %v", lb, err)
	}
	// A strictly valid body takes the fast path and is unchanged.
	var dv DataVersion
	if err := DecodeJSON([]byte(`{"counter":1,"timestamp":2}`), &dv); err != nil || dv != (DataVersion{1, 2}) {
		t.Fatalf("data version %+v %v", dv, err)
	}
}

// What fastjson would refuse stays an error.
func TestRemotingBodyLenientStillRejects(t *testing.T) {
	for _, in := range []string{
		`{"codeSet":["TagA"]}`,
		`{"codeSet":["99999999999"]}`,
		`{"codeSet":["1.5"]}`,
		`{"codeSet":[{}]}`,
		`{"subVersion":"x"}`,
		`{"classFilterMode":"maybe"}`,
		`{"codeSet":"1"}`,
	} {
		var sd SubscriptionData
		if err := DecodeJSON([]byte(in), &sd); !errors.Is(err, ErrBadBody) {
			t.Errorf("%s decoded (%+v), err %v", in, sd, err)
		}
	}
}

func FuzzDecodeJSONBody(f *testing.F) {
	for _, name := range []string{"heartbeat_consumer_tags.json", "lock_batch.json", "consumer_status.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "clientgo", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"offsetTable":{"T@g":{0:"5"}},"table":{"a":1}}`))
	// A RocketMQ 5 heartbeat v2 without subscriptions.
	f.Add([]byte(`{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[]}],"heartbeatFingerprint":-12,"withoutSub":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Whatever the bytes, decoding returns (never panics), and a body
		// that decodes encodes again.
		var hb HeartbeatData
		if DecodeJSON(b, &hb) == nil {
			if _, err := EncodeJSON(&hb); err != nil {
				t.Fatalf("re-encode heartbeat: %v", err)
			}
		}
		var ow ConsumerOffsetSerializeWrapper
		_ = DecodeJSON(b, &ow)
		var g SubscriptionGroupConfig
		_ = DecodeJSON(b, &g)
		var cs ConsumeStats
		_ = DecodeJSON(b, &cs)
		var st GetConsumerStatusBody
		if DecodeJSON(b, &st) == nil {
			if _, err := EncodeJSON(st); err != nil {
				t.Fatalf("re-encode consumer status: %v", err)
			}
		}
	})
}

// Keys and values of a MessageQueue-keyed map are lenient too.
func TestRemotingBodyLenientMQMap(t *testing.T) {
	var cs ConsumeStats
	in := `{"consumeTps":"1.5","offsetTable":{{"brokerName":"b","queueId":"2","topic":"T"}:{"brokerOffset":"9","consumerOffset":4,"lastTimestamp":""}}}`
	if err := DecodeJSON([]byte(in), &cs); err != nil {
		t.Fatal(err)
	}
	if cs.ConsumeTps != 1.5 || len(cs.OffsetTable) != 1 || cs.OffsetTable[0].Queue != (MessageQueue{"b", 2, "T"}) ||
		*cs.OffsetTable[0].Value != (OffsetWrapper{BrokerOffset: 9, ConsumerOffset: 4}) {
		t.Fatalf("consume stats %+v %+v", cs, cs.OffsetTable)
	}
}
