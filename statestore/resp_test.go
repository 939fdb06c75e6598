package statestore

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The request payloads of the seed and of statestore-protocol.md 1.7, byte
// for byte, parse to the commands they mean; the canonical re-encoding of
// the SDK forms is the same bytes.
func TestStateStoreRESPRequestExamples(t *testing.T) {
	cases := []struct {
		payload   string
		want      Command
		canonical bool // the bytes are what AppendRequest writes
	}{
		// seed (lower-case verbs)
		{"*3\r\n$3\r\nset\r\n$7\r\nSETKEY2\r\n$6\r\nVALUE5\r\n", Command{Verb: VerbSet, Key: []byte("SETKEY2"), Value: []byte("VALUE5")}, false},
		{"*2\r\n$3\r\nget\r\n$7\r\nSETKEY2\r\n", Command{Verb: VerbGet, Key: []byte("SETKEY2")}, false},
		{"*2\r\n$3\r\ndel\r\n$7\r\nSETKEY2\r\n", Command{Verb: VerbDel, Key: []byte("SETKEY2")}, false},
		{"*3\r\n$4\r\nvdel\r\n$7\r\nSETKEY2\r\n$3\r\nABC\r\n", Command{Verb: VerbVDel, Key: []byte("SETKEY2"), Value: []byte("ABC")}, false},
		// SDKs
		{"*3\r\n$3\r\nSET\r\n$7\r\nSETKEY2\r\n$6\r\nVALUE5\r\n", Command{Verb: VerbSet, Key: []byte("SETKEY2"), Value: []byte("VALUE5")}, true},
		{"*4\r\n$3\r\nSET\r\n$7\r\ntestkey\r\n$9\r\ntestvalue\r\n$2\r\nNX\r\n", Command{Verb: VerbSet, Key: []byte("testkey"), Value: []byte("testvalue"), Cond: CondNX}, true},
		{"*4\r\n$3\r\nSET\r\n$7\r\ntestkey\r\n$9\r\ntestvalue\r\n$3\r\nNEX\r\n", Command{Verb: VerbSet, Key: []byte("testkey"), Value: []byte("testvalue"), Cond: CondNEX}, true},
		{"*5\r\n$3\r\nSET\r\n$7\r\ntestkey\r\n$9\r\ntestvalue\r\n$2\r\nPX\r\n$2\r\n10\r\n", Command{Verb: VerbSet, Key: []byte("testkey"), Value: []byte("testvalue"), Expiry: 10 * time.Millisecond}, true},
		{"*6\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n", Command{Verb: VerbSet, Key: []byte("k1"), Value: []byte("v1"), Cond: CondNX, Expiry: 1500 * time.Millisecond}, true},
		{"*2\r\n$3\r\nGET\r\n$7\r\nSETKEY2\r\n", Command{Verb: VerbGet, Key: []byte("SETKEY2")}, true},
		{"*2\r\n$3\r\nDEL\r\n$7\r\nSETKEY2\r\n", Command{Verb: VerbDel, Key: []byte("SETKEY2")}, true},
		{"*3\r\n$4\r\nVDEL\r\n$7\r\nSETKEY2\r\n$3\r\nABC\r\n", Command{Verb: VerbVDel, Key: []byte("SETKEY2"), Value: []byte("ABC")}, true},
		{"*2\r\n$9\r\nKEYNOTIFY\r\n$7\r\nSOMEKEY\r\n", Command{Verb: VerbKeyNotify, Key: []byte("SOMEKEY")}, true},
		{"*3\r\n$9\r\nKEYNOTIFY\r\n$2\r\nk1\r\n$4\r\nSTOP\r\n", Command{Verb: VerbKeyNotify, Key: []byte("k1"), Stop: true}, true},
		// empty value
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", Command{Verb: VerbSet, Key: []byte("k"), Value: []byte{}}, true},
		// options in any order and case; extensions
		{"*6\r\n$3\r\nSeT\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\npx\r\n$1\r\n5\r\n$3\r\nnex\r\n", Command{Verb: VerbSet, Key: []byte("k"), Value: []byte("v"), Cond: CondNEX, Expiry: 5 * time.Millisecond}, false},
		{"*5\r\n$9\r\nKEYNOTIFY\r\n$1\r\np\r\n$6\r\nPREFIX\r\n$5\r\nSINCE\r\n$7\r\n1:2:abc\r\n", Command{Verb: VerbKeyNotify, Key: []byte("p"), Prefix: true, Since: HLC{1, 2, "abc"}}, false},
	}
	for _, c := range cases {
		got, err := ParseCommand([]byte(c.payload))
		if err != nil {
			t.Errorf("ParseCommand(%q): %v", c.payload, err)
			continue
		}
		if !commandsEqual(got, c.want) {
			t.Errorf("ParseCommand(%q) = %+v, want %+v", c.payload, got, c.want)
		}
		enc := got.AppendRequest(nil)
		if c.canonical && string(enc) != c.payload {
			t.Errorf("AppendRequest = %q, want %q", enc, c.payload)
		}
		again, err := ParseCommand(enc)
		if err != nil || !commandsEqual(again, got) {
			t.Errorf("re-parse of %q = %+v, %v", enc, again, err)
		}
	}
}

func commandsEqual(a, b Command) bool {
	return a.Verb == b.Verb && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && a.Cond == b.Cond &&
		a.Expiry == b.Expiry && a.Stop == b.Stop && a.Prefix == b.Prefix && a.Since == b.Since
}

func TestStateStoreRESPParseCommandErrors(t *testing.T) {
	cases := []struct {
		args []string
		want ServiceError
	}{
		{[]string{"NOPE", "k"}, ErrUnknownCommand},
		{[]string{""}, ErrUnknownCommand},
		{[]string{"SET", "k"}, ErrArity},
		{[]string{"SET"}, ErrArity},
		{[]string{"GET"}, ErrArity},
		{[]string{"VDEL", "k", "v", "w"}, ErrArity},
		{[]string{"SET", "k", "v", "NX", "NX"}, ErrSyntax},
		{[]string{"SET", "k", "v", "PX", "007"}, ""},
		{[]string{"SET", "k", "v", "PX", "9223372036854"}, ""},
		{[]string{"SET", "k", "v", "PX", "9223372036855"}, ErrSyntax},
		{[]string{"SET", "", "v", "NX"}, ErrEmptyKey},
		{[]string{"SET", "", "v", "BOGUS"}, ErrSyntax}, // options are checked before the key
		{[]string{"KEYNOTIFY", "k", "SINCE"}, ErrSyntax},
		{[]string{"KEYNOTIFY", "k", "SINCE", "1:1:a", "SINCE", "1:1:a"}, ErrSyntax},
		{[]string{"KEYNOTIFY", "k", "STOP", "STOP"}, ErrSyntax},
		{[]string{"KEYNOTIFY", "k", "PREFIX", "PREFIX"}, ErrSyntax},
		{[]string{"KEYNOTIFY", "k", "SINCE", "x"}, ErrMalformedTimestamp},
	}
	for _, c := range cases {
		var args [][]byte
		for _, a := range c.args {
			args = append(args, []byte(a))
		}
		_, err := ParseCommand(AppendRequest(nil, args...))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want != "" && !errors.Is(err, c.want):
			t.Errorf("%q: got %v, want %q", c.args, err, c.want)
		}
	}
	// RESP-level failures wrap both ErrSyntax and ErrBadRESP.
	_, err := ParseCommand([]byte("*1\r\n$3\r\nGET\r\n\r\n"))
	if !errors.Is(err, ErrSyntax) || !errors.Is(err, ErrBadRESP) {
		t.Errorf("trailing bytes: %v", err)
	}
	// More than MaxRequestArgs elements.
	many := make([][]byte, MaxRequestArgs+1)
	for i := range many {
		many[i] = []byte("x")
	}
	if _, err := ParseRequest(AppendRequest(nil, many...)); !errors.Is(err, ErrBadRESP) {
		t.Errorf("too many args: %v", err)
	}
	if _, err := ParseRequest(AppendRequest(nil, many[:MaxRequestArgs]...)); err != nil {
		t.Errorf("MaxRequestArgs args: %v", err)
	}
}

// Every truncation of a valid request is an error, never a panic.
func TestStateStoreRESPRequestTruncations(t *testing.T) {
	full := []byte("*6\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n")
	for i := 0; i < len(full); i++ {
		if _, err := ParseRequest(full[:i]); err == nil {
			t.Errorf("prefix of %d bytes parsed", i)
		}
	}
}

// The reply forms of statestore-protocol.md 1.8 decode and re-encode to the
// same bytes, and the engine's fixed replies are exactly them.
func TestStateStoreRESPReplyForms(t *testing.T) {
	cases := []struct {
		b    string
		want Value
	}{
		{"+OK\r\n", Value{Kind: KindSimple, Str: []byte("OK")}},
		{":-1\r\n", Value{Kind: KindInteger, Int: -1}},
		{":0\r\n", Value{Kind: KindInteger}},
		{":1\r\n", Value{Kind: KindInteger, Int: 1}},
		{":-9223372036854775808\r\n", Value{Kind: KindInteger, Int: -9223372036854775808}},
		{":9223372036854775807\r\n", Value{Kind: KindInteger, Int: 9223372036854775807}},
		{"$-1\r\n", Value{Kind: KindNull}},
		{"$4\r\n1234\r\n", Value{Kind: KindBulk, Str: []byte("1234")}},
		{"$0\r\n\r\n", Value{Kind: KindBulk, Str: []byte{}}},
		{"$2\r\n\r\n\r\n", Value{Kind: KindBulk, Str: []byte("\r\n")}},
		{"-ERR syntax error\r\n", Value{Kind: KindError, Str: []byte("ERR syntax error")}},
		{"*2\r\n$6\r\nNOTIFY\r\n$6\r\nDELETE\r\n", Value{Kind: KindArray, Array: []Value{{Kind: KindBulk, Str: []byte("NOTIFY")}, {Kind: KindBulk, Str: []byte("DELETE")}}}},
		{"*0\r\n", Value{Kind: KindArray, Array: []Value{}}},
		{"*2\r\n*1\r\n:5\r\n+x\r\n", Value{Kind: KindArray, Array: []Value{{Kind: KindArray, Array: []Value{{Kind: KindInteger, Int: 5}}}, {Kind: KindSimple, Str: []byte("x")}}}},
	}
	for _, c := range cases {
		v, err := DecodeReply([]byte(c.b))
		if err != nil || !reflect.DeepEqual(v, c.want) {
			t.Errorf("DecodeReply(%q) = %+v, %v; want %+v", c.b, v, err, c.want)
			continue
		}
		if enc := AppendValue(nil, v); string(enc) != c.b {
			t.Errorf("AppendValue = %q, want %q", enc, c.b)
		}
	}
	for got, want := range map[string]string{
		string(replyOK): "+OK\r\n", string(replyNotDone): ":-1\r\n", string(replyZero): ":0\r\n",
		string(replyOne): ":1\r\n", string(replyNil): "$-1\r\n", string(bulkReply([]byte("1234"))): "$4\r\n1234\r\n",
		string(errorReply(ErrSyntax)): "-ERR syntax error\r\n",
	} {
		if got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
	}
	bad := []string{
		"", "+OK", "+OK\n", "+O\rK\r\n", "+O\nK\r\n", ":\r\n", ":-\r\n", ":-0\r\n", ":01\r\n", ":+1\r\n", ":1", ":9223372036854775808\r\n",
		":-9223372036854775809\r\n", "$-2\r\n", "$-1\r", "$-10\r\n", "$01\r\nx\r\n", "$1\r\nxx\r\n", "$3\r\nab\r\n", "$2\r\nab", "*1\r\n", "*-1\r\n",
		"_\r\n", "#t\r\n", ",1.5\r\n", "+OK\r\n+OK\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
		"*999999999\r\n:1\r\n", "$1000000000\r\n",
	}
	for _, b := range bad {
		if v, err := DecodeReply([]byte(b)); !errors.Is(err, ErrBadRESP) {
			t.Errorf("DecodeReply(%q) = %+v, %v; want ErrBadRESP", b, v, err)
		}
	}
	if err := (Value{Kind: KindError, Str: []byte("ERR " + string(ErrFencingStale))}).Err(); !errors.Is(err, ErrFencingStale) {
		t.Errorf("Err() = %v", err)
	}
	if err := (Value{Kind: KindError, Str: []byte("WRONGTYPE x")}).Err(); err == nil || err.(ServiceError).Text() != "WRONGTYPE x" {
		t.Errorf("Err() = %v", err)
	}
	if err := (Value{Kind: KindSimple}).Err(); err != nil {
		t.Errorf("Err() of +OK = %v", err)
	}
}

// The notification payloads and topic of statestore-protocol.md 1.9 and
// the seed, byte for byte.
func TestStateStoreRESPNotificationWire(t *testing.T) {
	n := Notification{ClientID: "client-id1", Key: "SOMEKEY", Op: OpSet, Value: []byte("abc"), Version: HLC{1696374425000, 1, "StateStore"}}
	if got, want := string(n.Payload()), "*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUE\r\n$3\r\nabc\r\n"; got != want {
		t.Errorf("SET payload %q, want %q", got, want)
	}
	if got, want := n.Topic(), "clients/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/636C69656E742D696431/command/notify/534F4D454B4559"; got != want {
		t.Errorf("topic %q, want %q", got, want)
	}
	if got := strings.Count(n.Topic(), "/"); got != 7 {
		t.Errorf("topic has %d levels, the .NET client wants 8", got+1)
	}
	if got := NotifyTopic("\xff\x00", "\xab"); !strings.HasSuffix(got, "/FF00/command/notify/AB") {
		t.Errorf("hex is not upper-case: %q", got)
	}
	if got := n.UserProperties(); !reflect.DeepEqual(got, []UserProperty{{"__ts", "001696374425000:00001:StateStore"}}) {
		t.Errorf("notification properties %v", got)
	}
	d := Notification{ClientID: "c", Key: "k", Op: OpDelete, Version: HLC{1, 0, "n"}}
	if got, want := string(d.Payload()), "*2\r\n$6\r\nNOTIFY\r\n$6\r\nDELETE\r\n"; got != want {
		t.Errorf("DELETE payload %q, want %q", got, want)
	}
	for _, p := range [][]byte{n.Payload(), d.Payload()} {
		op, v, err := ParseNotification(p)
		if err != nil {
			t.Fatal(err)
		}
		if op == OpSet && string(v) != "abc" || op == OpDelete && v != nil {
			t.Errorf("ParseNotification(%q) = %v %q", p, op, v)
		}
	}
	for _, p := range []string{
		"*2\r\n$6\r\nNOTIFY\r\n$3\r\nDEL\r\n", "*3\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$1\r\nv\r\n", "*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUX\r\n$1\r\nv\r\n",
		"*2\r\n$6\r\nNOTIFY\r\n$7\r\nEXPIRED\r\n", "+OK\r\n", "*2\r\n+NOTIFY\r\n$6\r\nDELETE\r\n", "*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUE\r\n$-1\r\n",
	} {
		if _, _, err := ParseNotification([]byte(p)); !errors.Is(err, ErrBadNotification) {
			t.Errorf("ParseNotification(%q) = %v", p, err)
		}
	}
}

func TestStateStoreRESPReplyProperties(t *testing.T) {
	r := Reply{Payload: replyOK, Version: HLC{1696374425000, 1, "StateStore"}}
	want := []UserProperty{{"__stat", "200"}, {"__protVer", "1.0"}, {"__ts", "001696374425000:00001:StateStore"}}
	if got := r.UserProperties(); !reflect.DeepEqual(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	if got := (Reply{Payload: replyNil}).UserProperties(); len(got) != 2 {
		t.Errorf("GET miss carries __ts: %v", got)
	}
	if !ForbiddenResponseTopic(RequestTopic) || !ForbiddenResponseTopic(NotifyTopicPrefix+"/x") ||
		ForbiddenResponseTopic("clients/636C69656E74/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/command/invoke/response") {
		t.Error("ForbiddenResponseTopic")
	}
}

// ShardOf is a frozen mapping: these values must never change.
func TestStateStoreRESPShardOfPinned(t *testing.T) {
	pins := []struct {
		key  string
		n    int
		want int
	}{{"", 16, 5}, {"a", 16, 12}, {"SETKEY2", 16, 8}, {"LockName", 8, 1}, {"k", 1, 0}, {"k", 0, 0}}
	for _, p := range pins {
		if got := ShardOf([]byte(p.key), p.n); got != p.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", p.key, p.n, got, p.want)
		}
	}
	if !bytes.Equal(DedupKey([]byte{1, 2}, "rt"), []byte{0, 0, 0, 2, 1, 2, 0, 0, 0, 2, 'r', 't'}) {
		t.Errorf("DedupKey = %v", DedupKey([]byte{1, 2}, "rt"))
	}
	if bytes.Equal(DedupKey([]byte("ab"), "c"), DedupKey([]byte("a"), "bc")) {
		t.Error("DedupKey collides")
	}
}

func ExampleNotifyTopic() {
	fmt.Println(NotifyTopic("client-id1", "SOMEKEY"))
	// Output: clients/statestore/v1/FA9AE35F-2F64-47CD-9BFF-08E2B32A0FE8/636C69656E742D696431/command/notify/534F4D454B4559
}

func TestStateStoreRESPProtocolVersion(t *testing.T) {
	for v, want := range map[string]bool{"1.0": true, "1.7": true, "01.0": true, "2.0": false, "1": false, "1.": false, ".0": false, "1.x": false, "": false, "-1.0": false} {
		if got := ProtocolVersionSupported(v, true); got != want {
			t.Errorf("ProtocolVersionSupported(%q) = %v", v, got)
		}
	}
	if !ProtocolVersionSupported("", false) {
		t.Error("an absent __protVer means 1.0")
	}
	p := UnsupportedVersionProperties("2.0")
	want := []UserProperty{{"__stat", "505"}, {"__stMsg", "request version not supported"}, {"__requestProtVer", "2.0"}, {"__supProtMajVer", "1"}, {"__protVer", "1.0"}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("%v", p)
	}
}
