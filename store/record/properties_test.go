package record

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRecordPropertiesParse(t *testing.T) {
	cases := []struct {
		in   string
		want Properties
	}{
		{"", nil},
		{"KEYS\x01a b\x02TAGS\x01TagA", Properties{{"KEYS", "a b"}, {"TAGS", "TagA"}}},
		{"KEYS\x01a b\x02TAGS\x01TagA\x02", Properties{{"KEYS", "a b"}, {"TAGS", "TagA"}}}, // Go client's trailing 0x02
		{"\x02\x02K\x01V\x02\x02", Properties{{"K", "V"}}},                                 // empty chunks
		{"ab\x02K\x01V", Properties{{"K", "V"}}},                                           // chunk without 0x01
		{"\x01v\x02K\x01V", Properties{{"K", "V"}}},                                        // empty key
		{"k\x01\x02K\x01V", Properties{{"K", "V"}}},                                        // empty value
		{"a\x01", nil}, // short chunk
		{"k\x01v\x01w", Properties{{"k", "v\x01w"}}},             // split at the first 0x01
		{"k\x01v\x02k\x01w", Properties{{"k", "v"}, {"k", "w"}}}, // duplicates kept in order
		{"ключ\x01значение", Properties{{"ключ", "значение"}}},
	}
	for _, c := range cases {
		got, err := ParseProperties(c.in)
		if err != nil {
			t.Errorf("ParseProperties(%q): %v", c.in, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseProperties(%q) = %q, want %q", c.in, got, c.want)
		}
		// AllProperties yields the same pairs.
		var seq Properties
		for k, v := range AllProperties(c.in) {
			seq = append(seq, Property{k, v})
		}
		if !reflect.DeepEqual(seq, c.want) {
			t.Errorf("AllProperties(%q) = %q, want %q", c.in, seq, c.want)
		}
		// LookupProperty agrees with Get on every key (first match wins).
		for _, kv := range got {
			want, _ := got.Get(kv.Key)
			v, ok := LookupProperty([]byte(c.in), kv.Key)
			if !ok || string(v) != want {
				t.Errorf("LookupProperty(%q, %q) = %q, %v; want %q", c.in, kv.Key, v, ok, want)
			}
			if v, ok := LookupPropertyString(c.in, kv.Key); !ok || v != want {
				t.Errorf("LookupPropertyString(%q, %q) = %q, %v", c.in, kv.Key, v, ok)
			}
		}
	}
	for _, key := range []string{"ab", "", "v", "MISSING", "KEY"} {
		if v, ok := LookupProperty([]byte("ab\x02\x01v\x02KEYS\x01x"), key); ok {
			t.Errorf("LookupProperty found %q = %q", key, v)
		}
	}
	// LookupProperties: one pass, first match of each key, nil if absent.
	keys := []string{"KEYS", "ab", "TAGS", "k"}
	vals := [][]byte{[]byte("stale"), nil, nil, nil}
	LookupProperties([]byte("ab\x02\x01v\x02KEYS\x01x\x02TAGS\x01t1\x02KEYS\x01y\x02TAGS\x01t2\x02k\x01"), keys, vals)
	if string(vals[0]) != "x" || vals[1] != nil || string(vals[2]) != "t1" || vals[3] != nil {
		t.Errorf("LookupProperties = %q", vals)
	}
}

func TestRecordPropertiesEncode(t *testing.T) {
	p := Properties{{PropertyKeys, "k1 k2"}, {PropertyTags, "TagA"}, {PropertyUniqueClientMessageIDKeyIndex, "ABC"}}
	enc := AppendProperties([]byte("x"), p)
	if want := "xKEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x01ABC"; string(enc) != want {
		t.Fatalf("AppendProperties = %q, want %q", enc, want)
	}
	if p.String() != string(enc[1:]) || p.EncodedLen() != len(enc)-1 {
		t.Errorf("String/EncodedLen disagree with AppendProperties")
	}
	back, _ := ParseProperties(p.String())
	if !reflect.DeepEqual(back, p) {
		t.Errorf("round trip = %q", back)
	}
	if AppendProperties(nil, nil) != nil {
		t.Errorf("empty set encodes to non-empty")
	}

	p.Set(PropertyTags, "TagB")
	p.Set(PropertyWaitStoreMsgOK, "false")
	if got := p.String(); got != "KEYS\x01k1 k2\x02TAGS\x01TagB\x02UNIQ_KEY\x01ABC\x02WAIT\x01false" {
		t.Errorf("after Set: %q", got)
	}
	p.Del(PropertyKeys)
	if _, ok := p.Get(PropertyKeys); ok || len(p) != 3 {
		t.Errorf("Del left %q", p)
	}
	if v, ok := p.Get(PropertyWaitStoreMsgOK); !ok || v != "false" {
		t.Errorf("Get(WAIT) = %q, %v", v, ok)
	}
	dup := Properties{{"a", "1"}, {"b", "2"}, {"a", "3"}}
	dup.Set("a", "9")
	if !reflect.DeepEqual(dup, Properties{{"a", "9"}, {"b", "2"}}) {
		t.Errorf("Set with duplicates = %q", dup)
	}
}

func TestRecordPropertiesValidate(t *testing.T) {
	if err := (Properties{{"a", "b"}}).Validate(); err != nil {
		t.Errorf("valid set: %v", err)
	}
	for _, p := range []Properties{
		{{"", "b"}}, {{"a", ""}}, {{"a\x01", "b"}}, {{"a", "b\x02"}}, {{"a", "b\x01c"}},
	} {
		if err := p.Validate(); !errors.Is(err, ErrBadProperties) {
			t.Errorf("Validate(%q) = %v, want ErrBadProperties", p, err)
		}
	}
	big := Properties{{"k", strings.Repeat("v", MaxPropertiesLen-2)}}
	if err := big.Validate(); err != nil {
		t.Errorf("set of exactly MaxPropertiesLen: %v", err)
	}
	big = append(big, Property{"x", "y"})
	if err := big.Validate(); !errors.Is(err, ErrPropertiesTooLong) {
		t.Errorf("oversized set: %v", err)
	}
}

func TestRecordPropertyKeys(t *testing.T) {
	// Exact key strings are part of the wire format (section 3.3).
	keys := map[string]string{
		PropertyKeys: "KEYS", PropertyTags: "TAGS", PropertyWaitStoreMsgOK: "WAIT", PropertyDelayLevel: "DELAY",
		PropertyRetryTopic: "RETRY_TOPIC", PropertyRealTopic: "REAL_TOPIC", PropertyRealQueueID: "REAL_QID",
		PropertyTransactionPrepared: "TRAN_MSG", PropertyProducerGroup: "PGROUP", PropertyMinOffset: "MIN_OFFSET",
		PropertyMaxOffset: "MAX_OFFSET", PropertyBuyerID: "BUYER_ID", PropertyOriginMessageID: "ORIGIN_MESSAGE_ID",
		PropertyTransferFlag: "TRANSFER_FLAG", PropertyCorrectionFlag: "CORRECTION_FLAG", PropertyMQ2Flag: "MQ2_FLAG",
		PropertyReconsumeTime: "RECONSUME_TIME", PropertyMsgRegion: "MSG_REGION", PropertyTraceSwitch: "TRACE_ON",
		PropertyUniqueClientMessageIDKeyIndex: "UNIQ_KEY", PropertyMaxReconsumeTimes: "MAX_RECONSUME_TIMES",
		PropertyConsumeStartTimestamp: "CONSUME_START_TIME", PropertyTranPreparedQueueOffset: "TRAN_PREPARED_QUEUE_OFFSET",
		PropertyTransactionCheckTimes: "TRANSACTION_CHECK_TIMES", PropertyCheckImmunityTimeInSeconds: "CHECK_IMMUNITY_TIME_IN_SECONDS",
		PropertyInstanceID: "INSTANCE_ID", PropertyCorrelationID: "CORRELATION_ID", PropertyReplyToClient: "REPLY_TO_CLIENT",
		PropertyTTL: "TTL", PropertyArriveTime: "ARRIVE_TIME", PropertyPushReplyTime: "PUSH_REPLY_TIME",
		PropertyMsgType: "MSG_TYPE", PropertyCluster: "CLUSTER", PropertyInnerMultiDispatch: "INNER_MULTI_DISPATCH",
		PropertyInnerMultiQueueOffset: "INNER_MULTI_QUEUE_OFFSET",
	}
	for got, want := range keys {
		if got != want {
			t.Errorf("key constant %q, want %q", got, want)
		}
	}
	if len(keys) != 35 {
		t.Errorf("%d distinct keys, want 35", len(keys))
	}
}

func TestRecordForEachKey(t *testing.T) {
	var got []string
	ForEachKey([]byte("  a bb  ccc "), func(k []byte) { got = append(got, string(k)) })
	if !reflect.DeepEqual(got, []string{"a", "bb", "ccc"}) {
		t.Errorf("ForEachKey = %q", got)
	}
	got = nil
	ForEachKey(nil, func(k []byte) { got = append(got, string(k)) })
	ForEachKey([]byte("   "), func(k []byte) { got = append(got, string(k)) })
	if got != nil {
		t.Errorf("ForEachKey of blanks = %q", got)
	}
}

func TestRecordPropertiesZeroAlloc(t *testing.T) {
	raw := []byte("KEYS\x01order-1 order-2 order-3\x02TAGS\x01TagA\x02UNIQ_KEY\x017F0000010A8418B4AAC2000000000000\x02WAIT\x01true")
	rawS := string(raw)
	var n int
	if a := testing.AllocsPerRun(1000, func() {
		v, ok := LookupProperty(raw, PropertyUniqueClientMessageIDKeyIndex)
		if !ok || len(v) != 32 {
			t.Fatal("UNIQ_KEY not found")
		}
		keys, _ := LookupProperty(raw, PropertyKeys)
		ForEachKey(keys, func(k []byte) { n += len(k) })
		if _, ok := LookupProperty(raw, "MISSING"); ok {
			t.Fatal("found MISSING")
		}
		for k, v := range AllProperties(rawS) {
			n += len(k) + len(v)
			if k == PropertyTags {
				break
			}
		}
	}); a != 0 {
		t.Errorf("LookupProperty/ForEachKey/AllProperties allocate %.1f times per call, want 0", a)
	}
}

// KnownProperties describe only the very string they were made for.
func TestKnownProperties(t *testing.T) {
	props := "TAGS\x01t\x02KEYS\x01k"
	k := Know(props, [3][2]int{{5, 6}, {12, 13}, {0, 0}})
	if vals, ok := k.Values(props); !ok || vals != [3]string{"t", "k", ""} {
		t.Fatalf("Values = %q %v", vals, ok)
	}
	for _, other := range []string{strings.Clone(props), props[:len(props)-1], "", props + "\x02"} {
		if _, ok := k.Values(other); ok {
			t.Errorf("describes %q (another string)", other)
		}
	}
	var zero KnownProperties
	if _, ok := zero.Values(""); ok {
		t.Error("the zero KnownProperties describe a string")
	}
	for _, at := range [][3][2]int{{{5, 6}, {12, 14}}, {{-1, 0}}, {{6, 5}}} {
		if k := Know(props, at); k != zero {
			t.Errorf("Know(%v) = %+v, want none", at, k)
		}
		// Set in place over values known before: none left.
		k := Know(props, [3][2]int{{5, 6}, {12, 13}, {0, 0}})
		if k.Set(props, at); k != zero {
			t.Errorf("Set(%v) over known values = %+v, want none", at, k)
		}
	}
	var set KnownProperties
	if set.Set(props, [3][2]int{{5, 6}, {12, 13}, {0, 0}}); set != k {
		t.Errorf("Set = %+v, Know = %+v", set, k)
	}
	if k := Know(strings.Repeat("x", MaxPropertiesLen+1), [3][2]int{}); k != zero {
		t.Error("Know of a string too long")
	}
}
