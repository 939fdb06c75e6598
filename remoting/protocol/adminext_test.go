package protocol

import "testing"

// The JSON bodies of SmartGo's administration extensions, pinned byte for
// byte (adminext.go): key names and order are the wire format.
func TestProtocolAdminExtBodies(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{BridgeInfo{Node: "n1", Addrs: []string{"10.0.0.5:1883"}, Version: "0.1.0", StartedAt: 1700000000000, Connections: 3,
			Sessions: 4, Subscriptions: 5, ClusterSessions: 6, Retained: 7, Received: 8, Sent: 9},
			`{"node":"n1","addrs":["10.0.0.5:1883"],"version":"0.1.0","startedAt":1700000000000,"connections":3,"sessions":4,` +
				`"subscriptions":5,"clusterSessions":6,"retained":7,"received":8,"sent":9}`},
		{MQTTAdminRequest{Node: "n1", Op: MQTTOpDisconnect, ClientID: "dev-1"}, `{"node":"n1","op":"disconnect","clientId":"dev-1"}`},
		{MQTTAdminRequest{Node: "n1", Op: MQTTOpClients, Prefix: "d", After: "d1", Limit: 10},
			`{"node":"n1","op":"clients","prefix":"d","after":"d1","limit":10}`},
		{MQTTClientPage{Items: []MQTTClientInfo{{ClientID: "c", Node: "n", RemoteAddr: "1.2.3.4:5", Version: 5, KeepAliveSecs: 30,
			Subscriptions: []MQTTSubscription{{Filter: "a/#", QoS: 1}}, Inflight: 2, Queued: 1}}, Total: 1, Next: "c"},
			`{"items":[{"clientId":"c","node":"n","remoteAddr":"1.2.3.4:5","protocolVersion":5,"keepAlive":30,` +
				`"subscriptions":[{"filter":"a/#","qos":1}],"inflight":2,"queued":1}],"total":1,"next":"c"}`},
		{MQTTRetainedInfo{Topic: "t", QoS: 1, Size: 2, Payload: []byte("on")}, `{"topic":"t","qos":1,"size":2,"payload":"b24="}`},
		{StateStoreScanRequest{Prefix: []byte("k"), Limit: 5}, `{"prefix":"aw==","limit":5}`},
		{StateStoreScanPage{Keys: []StateStoreKey{{Key: []byte("k"), Value: []byte("v"), Size: 1, Version: "1:0:n", Shard: 2}}, More: true},
			`{"keys":[{"key":"aw==","value":"dg==","size":1,"version":"1:0:n","shard":2}],"more":true}`},
	} {
		got, err := EncodeJSON(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%T:\n got %s\nwant %s", c.v, got, c.want)
		}
	}
}
