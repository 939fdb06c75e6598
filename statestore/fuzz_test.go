package statestore

import (
	"bytes"
	"testing"
	"time"
)

// FuzzParseRequest feeds arbitrary payloads and __ts/__ft values through
// the request path. ParseRequest accepts only canonical bytes (re-encoding
// the arguments gives the input back), ParseCommand round-trips, and
// Prepare never panics; every entry it produces applies cleanly.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"*3\r\n$3\r\nset\r\n$7\r\nSETKEY2\r\n$6\r\nVALUE5\r\n",
		"*6\r\n$3\r\nSET\r\n$2\r\nk1\r\n$2\r\nv1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$4\r\n1500\r\n",
		"*4\r\n$3\r\nSET\r\n$7\r\ntestkey\r\n$9\r\ntestvalue\r\n$3\r\nNEX\r\n",
		"*2\r\n$3\r\nGET\r\n$7\r\nSETKEY2\r\n",
		"*2\r\n$3\r\nDEL\r\n$7\r\nSETKEY2\r\n",
		"*3\r\n$4\r\nVDEL\r\n$7\r\nSETKEY2\r\n$3\r\nABC\r\n",
		"*3\r\n$9\r\nKEYNOTIFY\r\n$2\r\nk1\r\n$4\r\nSTOP\r\n",
		"*5\r\n$9\r\nKEYNOTIFY\r\n$1\r\np\r\n$6\r\nPREFIX\r\n$5\r\nSINCE\r\n$7\r\n1:2:abc\r\n",
		"*1\r\n$0\r\n\r\n", "", "*", "*0\r\n", "$-1\r\n",
	} {
		f.Add([]byte(s), "1696374425000:0:Client1", "", true)
		f.Add([]byte(s), "x", "1696374425000:0:Client1", false)
	}
	now := time.UnixMilli(1696374425000)
	f.Fuzz(func(t *testing.T, payload []byte, ts, ft string, fenced bool) {
		args, err := ParseRequest(payload)
		if err == nil {
			if enc := AppendRequest(nil, args...); !bytes.Equal(enc, payload) {
				t.Fatalf("ParseRequest accepted non-canonical %q (re-encodes to %q)", payload, enc)
			}
		}
		c, err := ParseCommand(payload)
		if err == nil {
			again, err := ParseCommand(c.AppendRequest(nil))
			if err != nil || !commandsEqual(c, again) {
				t.Fatalf("command %+v re-parses to %+v, %v", c, again, err)
			}
		}
		e, _ := New(Options{MaxKeySize: 64, MaxValueSize: 64}, nil)
		r := &Request{Payload: payload, ClientID: "c", DedupKey: []byte("d"), DedupTTL: time.Second}
		r.SetUserProperty(PropTimestamp, ts)
		if fenced {
			r.SetUserProperty(PropFencingToken, ft)
		}
		for i := 0; i < 2; i++ { // the second time through the cache or the table
			entry, out, needsLog := e.Prepare(r, now)
			if !needsLog {
				if len(out.Reply.Payload) == 0 {
					t.Fatal("empty reply")
				}
				if _, err := DecodeReply(out.Reply.Payload); err != nil {
					t.Fatalf("reply %q does not decode: %v", out.Reply.Payload, err)
				}
				continue
			}
			out, err := e.Apply(entry, now)
			if err != nil {
				t.Fatalf("Apply of a prepared entry: %v", err)
			}
			if _, err := DecodeReply(out.Reply.Payload); err != nil {
				t.Fatalf("reply %q does not decode: %v", out.Reply.Payload, err)
			}
		}
	})
}

// FuzzDecodeReply: DecodeReply never panics and accepts only canonical
// bytes; ParseNotification accepts only the two NOTIFY shapes.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{
		"+OK\r\n", ":-1\r\n", ":0\r\n", ":1\r\n", "$-1\r\n", "$4\r\n1234\r\n", "$0\r\n\r\n", "-ERR syntax error\r\n",
		"*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUE\r\n$3\r\nabc\r\n", "*2\r\n$6\r\nNOTIFY\r\n$6\r\nDELETE\r\n",
		"*2\r\n*1\r\n:5\r\n+x\r\n", ":-9223372036854775808\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeReply(b)
		if err == nil {
			if enc := AppendValue(nil, v); !bytes.Equal(enc, b) {
				t.Fatalf("DecodeReply accepted non-canonical %q (re-encodes to %q)", b, enc)
			}
			_ = v.Err()
		}
		op, val, err := ParseNotification(b)
		if err == nil {
			n := Notification{Op: op, Value: val}
			if !bytes.Equal(n.Payload(), b) {
				t.Fatalf("ParseNotification accepted %q, re-encodes to %q", b, n.Payload())
			}
		}
	})
}

// FuzzApplyEntry: Apply of arbitrary bytes never panics, and a refused
// entry changes nothing. With fixCRC the trailing checksum is recomputed
// so that the fields behind it are exercised.
func FuzzApplyEntry(f *testing.F) {
	for _, r := range scriptedLog(f, 30, 7) {
		f.Add(r.entry, false)
		f.Add(r.entry, true)
	}
	f.Fuzz(func(t *testing.T, entry []byte, fixCRC bool) {
		if fixCRC && len(entry) >= 4 {
			entry = resum(bytes.Clone(entry))
		}
		e, _ := New(Options{}, nil)
		if _, err := e.Apply(entry, t0); err != nil {
			if st := e.Stats(); st.Keys != 0 || st.History != 0 || !st.Applied.IsZero() || st.Cached != 0 {
				t.Fatalf("a refused entry changed the engine: %+v", st)
			}
		}
	})
}

// FuzzRestore: Restore of arbitrary bytes never panics; whatever it
// accepts snapshots back to the same bytes. With fixCRC the trailing
// checksum is recomputed so that the fields behind it are exercised.
func FuzzRestore(f *testing.F) {
	for _, b := range [][]byte{snapshotBytes(f, scriptedEngine(f, 40, 3)), snapshotBytes(f, mustEngine(f, Options{}))} {
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= 4 {
			b = resum(bytes.Clone(b))
		}
		e, _ := New(Options{}, nil)
		if err := e.Restore(bytes.NewReader(b)); err != nil {
			return
		}
		if got := snapshotBytes(t, e); !bytes.Equal(got, b) {
			t.Fatalf("restored %x, snapshots as %x", b, got)
		}
	})
}
