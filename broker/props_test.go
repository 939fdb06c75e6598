package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

func hasProp(m *record.Message, key string) bool {
	_, ok := record.LookupPropertyString(m.Properties, key)
	return ok
}

func TestBrokerStoredProperties(t *testing.T) {
	const sep, kv = "\x02", "\x01"
	cases := []struct {
		in, want string
		wait     bool
	}{
		{"", "CLUSTER" + kv + "C", true},
		{"WAIT" + kv + "true", "CLUSTER" + kv + "C", true},
		{"WAIT" + kv + "false", "CLUSTER" + kv + "C", false},
		// rocketmq-client-go ends its properties with a separator.
		{"TAGS" + kv + "A" + sep + "WAIT" + kv + "true" + sep + "KEYS" + kv + "k1 k2" + sep,
			"TAGS" + kv + "A" + sep + "KEYS" + kv + "k1 k2" + sep + "CLUSTER" + kv + "C", true},
		{"CLUSTER" + kv + "other" + sep + "UNIQ_KEY" + kv + "U" + sep + sep + "WAIT" + kv + "false",
			"UNIQ_KEY" + kv + "U" + sep + "CLUSTER" + kv + "C", false},
		// A key merely starting with WAIT is kept.
		{"WAITING" + kv + "x", "WAITING" + kv + "x" + sep + "CLUSTER" + kv + "C", true},
	}
	for _, c := range cases {
		got, wait := storedProperties(c.in, "C")
		if got != c.want || wait != c.wait {
			t.Errorf("storedProperties(%q) = %q, %v; want %q, %v", c.in, got, wait, c.want, c.wait)
		}
	}
	items := map[string]string{
		"":                              "",
		"TAGS\x01A":                     "TAGS\x01A",
		"WAIT\x01true":                  "",
		"WAIT\x01true\x02TAGS\x01A\x02": "TAGS\x01A",
		"TAGS\x01A\x02WAIT\x01true\x02UNIQ_KEY\x01U":  "TAGS\x01A\x02UNIQ_KEY\x01U",
		"TAGS\x01A\x02WAITING\x01x\x02WAIT\x01false":  "TAGS\x01A\x02WAITING\x01x",
		"WAIT\x01true\x02WAIT\x01true\x02KEYS\x01a b": "KEYS\x01a b",
	}
	for in, want := range items {
		b := []byte(in)
		if got := string(stripWaitInPlace(b)); got != want {
			t.Errorf("stripWaitInPlace(%q) = %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { stripWaitInPlace([]byte("TAGS\x01A\x02WAIT\x01true\x02UNIQ_KEY\x01U")) }); n > 1 {
		t.Errorf("stripWaitInPlace allocates %v times", n)
	}
}

// WAIT is a request flag: no stored message carries it, whichever path
// stored it (send, batch, delay re-put, send-back), and CLUSTER names the
// storing broker's cluster.
func TestBrokerStripsWaitBeforeStoring(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	noWait := func(what string, m *record.Message) {
		t.Helper()
		if hasProp(m, record.PropertyWaitStoreMsgOK) || propOf(m, record.PropertyCluster) != "TestCluster" {
			t.Errorf("%s stored with properties %q", what, m.Properties)
		}
	}
	first := c.mustSend("WaitTopic", 0, "w-true", props(record.PropertyTags, "A", record.PropertyWaitStoreMsgOK, "true")+"\x02")
	c.mustSend("WaitTopic", 0, "w-false", props(record.PropertyWaitStoreMsgOK, "false", record.PropertyKeys, "k"))
	c.mustSend("WaitTopic", 0, "w-delayed", props(record.PropertyWaitStoreMsgOK, "true", record.PropertyDelayLevel, "1"))
	// The delayed message comes back to the topic after its delay level
	// (50 ms here): three messages in all.
	waitDispatched(t, b, "WaitTopic", 0, 3)
	r := c.pull("wg", "WaitTopic", 0, 0, flagSubscription, 0, "*")
	if r.code != protocol.Success || len(r.msgs) != 3 {
		t.Fatalf("pull: %d, %d msgs", r.code, len(r.msgs))
	}
	byBody := map[string]*record.Message{}
	for _, m := range r.msgs {
		byBody[string(m.Body)] = m
		noWait(string(m.Body), m)
	}
	if propOf(byBody["w-true"], record.PropertyTags) != "A" || propOf(byBody["w-false"], record.PropertyKeys) != "k" ||
		propOf(byBody["w-delayed"], record.PropertyRealTopic) != "WaitTopic" {
		t.Fatalf("other properties lost: %q %q %q", byBody["w-true"].Properties, byBody["w-false"].Properties, byBody["w-delayed"].Properties)
	}

	var body []byte
	for i := 0; i < 3; i++ {
		body = record.AppendBatchItem(body, 0, []byte("item-"+itoa(i)), props(record.PropertyWaitStoreMsgOK, "true", record.PropertyTags, "B")+"\x02")
	}
	bh := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "WaitBatch", DefaultTopic: AutoCreateTopicKey, DefaultTopicQueueNums: 4,
		QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true, Properties: props(record.PropertyWaitStoreMsgOK, "true")}
	if resp := c.invoke(protocol.SendBatchMessage, bh.V2(), body); resp.Code != protocol.Success {
		t.Fatalf("batch: %d %s", resp.Code, resp.Remark)
	}
	waitDispatched(t, b, "WaitBatch", 0, 3)
	r = c.pull("wg", "WaitBatch", 0, 0, flagSubscription, 0, "*")
	for _, m := range r.msgs {
		noWait("batch item", m)
		if propOf(m, record.PropertyTags) != "B" {
			t.Fatalf("batch item lost its tag: %q", m.Properties)
		}
	}

	_, phy, _ := record.ParseOffsetMessageID(first.MsgID)
	if resp := c.invoke(protocol.ConsumerSendMsgBack, &protocol.ConsumerSendMsgBackRequestHeader{Offset: phy, Group: "wg", OriginMsgID: first.MsgID}, nil); resp.Code != protocol.Success {
		t.Fatalf("send back: %d %s", resp.Code, resp.Remark)
	}
	var retry pullResult
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		retry = c.pull("wg", "%RETRY%wg", 0, 0, flagSubscription, 0, "*")
		return retry.code == protocol.Success
	})
	noWait("retried message", retry.msgs[0])
	if propOf(retry.msgs[0], record.PropertyRetryTopic) != "WaitTopic" {
		t.Fatalf("retried message %q", retry.msgs[0].Properties)
	}
}

// The stripped WAIT still decides whether a sync master waits for a slave:
// with no slave, WAIT=true answers SLAVE_NOT_AVAILABLE and WAIT=false
// answers at once.
func TestBrokerWaitFalseStillHonoured(t *testing.T) {
	b := testBroker(t, t.TempDir(), func(o *Options) { o.Role = RoleSyncMaster })
	c := newTestClient(t, b.Addr())
	if resp := c.send("SyncTopic", 0, "a", props(record.PropertyWaitStoreMsgOK, "true")); resp.Code != protocol.SlaveNotAvailable {
		t.Fatalf("WAIT=true without a slave answered %d %s", resp.Code, resp.Remark)
	}
	if resp := c.send("SyncTopic", 0, "b", props(record.PropertyWaitStoreMsgOK, "false")); resp.Code != protocol.Success {
		t.Fatalf("WAIT=false answered %d %s", resp.Code, resp.Remark)
	}
	waitDispatched(t, b, "SyncTopic", 0, 2)
	for _, m := range c.pull("sg", "SyncTopic", 0, 0, flagSubscription, 0, "*").msgs {
		if hasProp(m, record.PropertyWaitStoreMsgOK) {
			t.Fatalf("stored %q", m.Properties)
		}
	}
}

// refStoredProperties is what the broker stored before the one-pass
// appendStoredProperties: markHalf (PGROUP appended to a half message
// without one), then storedProperties' rewrite, then the lookups.
func refStoredProperties(props, cluster, group string) (string, sendProps) {
	const sep, kv = string(record.PropertySeparator), string(record.NameValueSeparator)
	v, ok := record.LookupPropertyString(props, record.PropertyTransactionPrepared)
	half := ok && strings.EqualFold(v, "true")
	if _, ok := record.LookupPropertyString(props, record.PropertyProducerGroup); half && !ok && group != "" {
		props = appendProperty(props, record.PropertyProducerGroup, group)
	}
	info := sendProps{wait: true, half: half}
	var out []string
	for _, chunk := range strings.Split(props, sep) {
		k, v, _ := strings.Cut(chunk, kv)
		switch {
		case chunk == "", k == record.PropertyCluster:
		case k == record.PropertyWaitStoreMsgOK:
			info.wait = v != "false"
		default:
			out = append(out, chunk)
		}
	}
	stored := strings.Join(append(out, record.PropertyCluster+kv+cluster), sep)
	info.delay, info.hasDelay = record.LookupPropertyString(stored, record.PropertyDelayLevel)
	if mt, _ := record.LookupPropertyString(stored, record.PropertyMsgType); mt == protocol.ReplyMessageFlag {
		info.reply = true
	} else {
		info.replyTo, _ = record.LookupPropertyString(stored, record.PropertyReplyToClient)
	}
	return stored, info
}

// checkKnown fails unless info.known places, in stored, the values the
// store would look up there (record.KnownProperties).
func checkKnown(t *testing.T, stored []byte, info sendProps) {
	t.Helper()
	for i, key := range record.KnownKeys {
		want, _ := record.LookupPropertyString(string(stored), key)
		at := info.known[i]
		if got := string(stored[at[0]:at[1]]); got != want {
			t.Errorf("%q: %s at %v is %q, the store looks up %q", stored, key, at, got, want)
		}
	}
}

func TestBrokerAppendStoredProperties(t *testing.T) {
	const sep, kv = "\x02", "\x01"
	for _, in := range []string{
		"",
		"TRAN_MSG" + kv + "true" + sep + "WAIT" + kv + "false",
		"TRAN_MSG" + kv + "TRUE" + sep + "PGROUP" + kv + "g0" + sep,
		"TRAN_MSG" + kv + sep + "TRAN_MSG" + kv + "true" + sep + "PGROUP" + kv + sep + "DELAY" + kv + sep + "DELAY" + kv + "3",
		"TRAN_MSG" + kv + "false" + sep + "TRAN_MSG" + kv + "true",
		"UNIQ_KEY" + kv + "U" + sep + "DELAY" + kv + "2" + sep + "CLUSTER" + kv + "x" + sep + "DELAY" + kv + "5" + sep,
		kv + "v" + sep + "k" + sep + "k" + kv + sep + sep + "TAGS" + kv + "A",
		"TAGS" + kv + sep + "KEYS" + kv + "a b" + sep + "TAGS" + kv + "t" + sep + "UNIQ_KEY" + kv + "u" + kv + "v" + sep + "TAGS" + kv + "x" + sep + "KEYS" + kv + "c",
		"REPLY_TO_CLIENT" + kv + sep + "CORRELATION_ID" + kv + "c" + sep + "REPLY_TO_CLIENT" + kv + "me" + sep + "REPLY_TO_CLIENT" + kv + "x",
		"MSG_TYPE" + kv + "reply" + sep + "REPLY_TO_CLIENT" + kv + "them",
		"MSG_TYPE" + kv + sep + "MSG_TYPE" + kv + "request" + sep + "MSG_TYPE" + kv + "reply" + sep + "REPLY_TO_CLIENT" + kv + "me",
	} {
		for _, group := range []string{"", "g"} {
			want, wantInfo := refStoredProperties(in, "C", group)
			var buf [8]byte
			got, info := appendStoredProperties(buf[:0], in, "C", group)
			checkKnown(t, got, info)
			info.known = wantInfo.known
			if string(got) != want || info != wantInfo {
				t.Errorf("appendStoredProperties(%q, %q) = %q %+v, want %q %+v", in, group, got, info, want, wantInfo)
			}
			checkStoredEscaped(t, in, group)
		}
	}
	var buf [pendingPropsLen]byte
	props := "UNIQ_KEY\x017F0000010001000000000000000000000003\x02WAIT\x01true\x02TAGS\x01tag\x02KEYS\x01k1 k2"
	if n := testing.AllocsPerRun(100, func() { appendStoredProperties(buf[:0], props, "DefaultCluster", "group") }); n != 0 {
		t.Errorf("appendStoredProperties allocates %v times", n)
	}
	esc := jsonSeparators(props)
	if n := testing.AllocsPerRun(100, func() { appendStoredPropertiesEscaped(buf[:0], esc, "DefaultCluster", "group") }); n != 0 {
		t.Errorf("appendStoredPropertiesEscaped allocates %v times", n)
	}
}

// jsonSeparators is props as a JSON header escapes its separators.
func jsonSeparators(props string) string {
	return strings.NewReplacer("\x01", `\u0001`, "\x02", `\u0002`).Replace(props)
}

// checkStoredEscaped fails unless appendStoredPropertiesEscaped of in's
// JSON form (in without a backslash) stores and reads what
// appendStoredProperties of in does.
func checkStoredEscaped(t *testing.T, in, group string) {
	t.Helper()
	if strings.Contains(in, `\`) {
		return
	}
	want, wantInfo := appendStoredProperties(nil, in, "C", group)
	var buf [8]byte
	got, info := appendStoredPropertiesEscaped(buf[:0], jsonSeparators(in), "C", group)
	if string(got) != string(want) || info != wantInfo {
		t.Fatalf("appendStoredPropertiesEscaped(%q, %q) = %q %+v, want %q %+v", jsonSeparators(in), group, got, info, want, wantInfo)
	}
}

// FuzzBrokerStoredProperties: the one pass stores what the passes before
// it stored and reads what their lookups read.
func FuzzBrokerStoredProperties(f *testing.F) {
	f.Add("TAGS\x01A\x02WAIT\x01true\x02KEYS\x01k1 k2\x02", "g")
	f.Add("TRAN_MSG\x01True\x02DELAY\x013\x02CLUSTER\x01c", "")
	f.Add("\x01\x02\x02PGROUP\x01\x02TRAN_MSG\x01true", "g")
	f.Add("TAGS\x01\x02UNIQ_KEY\x01u\x01\x02TAGS\x01t\x02KEYS\x01k\x02KEYS\x01j\x02UNIQ_KEY\x01w", "")
	f.Fuzz(func(t *testing.T, in, group string) {
		want, wantInfo := refStoredProperties(in, "C", group)
		got, info := appendStoredProperties(nil, in, "C", group)
		checkKnown(t, got, info)
		info.known = wantInfo.known
		if string(got) != want || info != wantInfo {
			t.Fatalf("appendStoredProperties(%q, %q) = %q %+v, want %q %+v", in, group, got, info, want, wantInfo)
		}
		checkStoredEscaped(t, in, group)
	})
}
