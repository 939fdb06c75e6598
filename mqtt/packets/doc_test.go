package packets

import (
	"bytes"
	"encoding/hex"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docLines returns the comment lines of doc.go.
func docLines(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(src), "\n")
}

func hexFields(s string) []byte {
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		return nil
	}
	return b
}

// TestMQTTPacketsDocVarInt pins the variable byte integer table of doc.go:
// every row must be what the encoder writes and the decoder reads.
func TestMQTTPacketsDocVarInt(t *testing.T) {
	row := regexp.MustCompile(`^//\t([0-9,]+)\s+((?:[0-9A-F]{2} ?)+)$`)
	rows := 0
	for _, l := range docLines(t) {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		if err != nil {
			t.Fatal(err)
		}
		want := hexFields(m[2])
		if got := appendVarInt(nil, v); !bytes.Equal(got, want) || varIntLen(v) != len(want) {
			t.Errorf("%d: encoded % X, doc says % X", v, got, want)
		}
		if got, n, res := parseVarInt(want); got != v || n != len(want) || res != varIntOK {
			t.Errorf("% X: decoded %d (%d bytes, %d)", want, got, n, res)
		}
		rows++
	}
	if rows != 8 {
		t.Fatalf("found %d varint rows in doc.go, want 8", rows)
	}
	if _, _, res := parseVarInt([]byte{0x80, 0x00}); res != varIntNotMinimal {
		t.Error("80 00 accepted")
	}
	if _, _, res := parseVarInt([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0x7F}); res != varIntTooLong {
		t.Error("5-byte varint accepted")
	}
}

// TestMQTTPacketsDocExample pins the PUBLISH example of doc.go.
func TestMQTTPacketsDocExample(t *testing.T) {
	p := &Publish{QoS: 1, Topic: "a/b", PacketID: 10, Payload: []byte("hi")}
	p5 := *p
	p5.Properties.Present.Add(PropMessageExpiry)
	p5.Properties.MessageExpiry = 60
	p5.Properties.User = []UserProperty{{"k", "v"}}
	found := 0
	for _, l := range docLines(t) {
		for prefix, c := range map[string]struct {
			p Packet
			v Version
		}{"//\t3.1.1: ": {p, Version311}, "//\t5.0:   ": {&p5, Version5}} {
			rest, ok := strings.CutPrefix(l, prefix)
			if !ok {
				continue
			}
			want := hexFields(rest)
			got, err := AppendPacket(nil, c.p, c.v)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: encoded % X, doc says % X (%v)", prefix, got, want, err)
			}
			found++
		}
	}
	if found != 2 {
		t.Fatalf("found %d examples in doc.go, want 2", found)
	}
}
