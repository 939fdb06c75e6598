package protocol

import (
	"errors"
	"testing"
)

// The twin request codes are frozen wire values; the shard travels in the
// header field "shard" and the body as it is.
func TestTwinCommandsPinned(t *testing.T) {
	if TwinInvoke != 9120 || TwinNotify != 9121 || TwinWatch != 9122 {
		t.Fatalf("twin codes moved: %d %d %d", TwinInvoke, TwinNotify, TwinWatch)
	}
	c := NewTwinRequest(5, []byte{1, 2})
	if c.Code != TwinInvoke || c.ExtFields["shard"] != "5" || string(c.Body) != "\x01\x02" {
		t.Fatalf("command %+v", c)
	}
	c.SerializeType = SerializeRocketMQ
	frame, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if shard, err := TwinShard(back); err != nil || shard != 5 {
		t.Fatalf("shard %d %v", shard, err)
	}
	if _, err := TwinShard(NewRequest(TwinInvoke, nil, nil)); !errors.Is(err, ErrMissingField) {
		t.Fatalf("missing shard: %v", err)
	}
	bad := NewRequest(TwinInvoke, nil, nil)
	bad.ExtFields = ExtFields{"shard": "x"}
	if _, err := TwinShard(bad); !errors.Is(err, ErrBadField) {
		t.Fatalf("bad shard: %v", err)
	}
}

// SmartGo's own request codes (beside RocketMQ's, which stay below 1000
// apart from the controller's) must not collide: two features landing
// the same number would send one's requests to the other's processor.
func TestSmartGoCodesDistinct(t *testing.T) {
	codes := map[string]RequestCode{
		"StateStoreInvoke": StateStoreInvoke, "StateStoreNotify": StateStoreNotify, "StateStoreDropClient": StateStoreDropClient,
		"StateStoreScan": StateStoreScan, "TwinInvoke": TwinInvoke, "TwinNotify": TwinNotify, "TwinWatch": TwinWatch,
		"RegisterBridge": RegisterBridge, "UnregisterBridge": UnregisterBridge, "GetBridgeList": GetBridgeList, "MQTTAdmin": MQTTAdmin,
		"BrokerHeartbeat": BrokerHeartbeat, "ControllerAlterSyncStateSet": ControllerAlterSyncStateSet,
		"ControllerElectMaster": ControllerElectMaster, "ControllerRegisterBroker": ControllerRegisterBroker,
		"ControllerGetMetadata": ControllerGetMetadata, "NotifyBrokerRoleChanged": NotifyBrokerRoleChanged,
		"ForwardReplyMessage": ForwardReplyMessage, "NotifyMetadataChanged": NotifyMetadataChanged,
	}
	seen := map[RequestCode]string{}
	for name, c := range codes {
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s are both %d", name, other, c)
		}
		seen[c] = name
	}
}
