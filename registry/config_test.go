package registry

import (
	"reflect"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// mqadmin getNamesrvConfig and updateNamesrvConfig, asked as mqadmin asks:
// GET_NAMESRV_CONFIG answers properties text; UPDATE_NAMESRV_CONFIG
// changes what may change at run time, at once, and refuses the rest.
func TestRegistryNamesrvConfig(t *testing.T) {
	s, reg := startRegistry(t, Options{KVConfigPath: ""})
	resp := testnet.JavaInvoke(t, reg, protocol.GetNamesrvConfig, nil, nil)
	if resp.Code != protocol.Success {
		t.Fatalf("get config: %d %s", resp.Code, resp.Remark)
	}
	cfg, err := protocol.DecodeProperties(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"listenPort": cfg["listenPort"], "kvConfigPath": "", "serverChannelMaxIdleTimeSeconds": "120",
		"maxFrameSize": "16777216", "scanInterval": "10s", "brokerExpiry": "2m0s"}
	if cfg["listenPort"] == "" || !reflect.DeepEqual(cfg, want) {
		t.Fatalf("config %v\nwant %v", cfg, want)
	}

	// A broker that stops registering is removed after the new expiry.
	newTestBroker(t, "broker-x", "10.0.0.9:10911", 0, "ConfTopic").register(reg)
	update := func(kv map[string]string) *protocol.Command {
		return testnet.JavaInvoke(t, reg, protocol.UpdateNamesrvConfig, nil, protocol.EncodeProperties(kv))
	}
	if resp := update(map[string]string{"scanInterval": "1000", "brokerExpiry": "1s"}); resp.Code != protocol.Success {
		t.Fatalf("update: %d %s", resp.Code, resp.Remark)
	}
	if c := s.Config(); c["scanInterval"] != "1s" || c["brokerExpiry"] != "1s" {
		t.Fatalf("config after update %v", c)
	}
	c := newCaller(t)
	testutil.WaitFor(t, 10*time.Second, "the silent broker to expire", func() bool {
		rd, _ := route(t, c, reg, "ConfTopic")
		return rd == nil
	})

	for _, bad := range []struct {
		kv   map[string]string
		code int32
	}{
		{map[string]string{"kvConfigPath": "/tmp/x"}, protocol.NoPermission},
		{map[string]string{"listenPort": "1"}, protocol.NoPermission},
		{map[string]string{"noSuchKey": "1"}, protocol.SystemError},
		{map[string]string{"scanInterval": "soon"}, protocol.SystemError},
		{map[string]string{"scanInterval": "5s", "brokerExpiry": "2s"}, protocol.SystemError},
	} {
		if resp := update(bad.kv); resp.Code != bad.code || resp.Remark == "" {
			t.Errorf("update %v: %d %q, want %d", bad.kv, resp.Code, resp.Remark, bad.code)
		}
	}
	if c := s.Config(); c["scanInterval"] != "1s" || c["brokerExpiry"] != "1s" {
		t.Fatalf("refused updates changed the config: %v", c)
	}
}

// GET_SYSTEM_TOPIC_LIST_FROM_NS lists cluster and broker names; the unit
// topic lists select topics by their sys flag.
func TestRegistrySystemAndUnitTopicLists(t *testing.T) {
	_, reg := startRegistry(t, Options{})
	b := newTestBroker(t, "broker-a", "10.0.0.1:10911", 0, "Plain", "Unit", "UnitSub", "Both")
	b.topics["Unit"].TopicSysFlag = 1
	b.topics["UnitSub"].TopicSysFlag = 2
	b.topics["Both"].TopicSysFlag = 3
	b.register(reg)
	list := func(code int32) protocol.TopicList {
		resp := testnet.JavaInvoke(t, reg, code, nil, nil)
		var tl protocol.TopicList
		if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &tl) != nil {
			t.Fatalf("code %d: %d %s", code, resp.Code, resp.Remark)
		}
		return tl
	}
	if tl := list(protocol.GetSystemTopicListFromNS); !reflect.DeepEqual(tl.TopicList, []string{"DefaultCluster", "broker-a"}) ||
		tl.BrokerAddr != "10.0.0.1:10911" {
		t.Fatalf("system topics %+v", tl)
	}
	for code, want := range map[int32][]string{
		protocol.GetUnitTopicList:             {"Both", "Unit"},
		protocol.GetHasUnitSubTopicList:       {"Both", "UnitSub"},
		protocol.GetHasUnitSubUnunitTopicList: {"UnitSub"},
	} {
		if got := list(code).TopicList; !reflect.DeepEqual(got, want) {
			t.Errorf("code %d: %v, want %v", code, got, want)
		}
	}
}
