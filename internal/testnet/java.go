package testnet

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// javaOpaque numbers the raw requests of javaInvoke.
var javaOpaque atomic.Int32

// JavaInvoke sends one request shaped as RocketMQ 4.9.8's Java client
// (mqadmin) writes it: a JSON header with fastjson's sorted keys, language
// JAVA, version 409 (V4_9_8), extFields only when the header has fields,
// all values strings. It reads the response frame and decodes it.
func JavaInvoke(t testing.TB, addr string, code int32, fields map[string]string, body []byte) *protocol.Command {
	t.Helper()
	var hdr strings.Builder
	hdr.WriteString(`{"code":` + strconv.Itoa(int(code)))
	if fields != nil {
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hdr.WriteString(`,"extFields":{`)
		for i, k := range keys {
			if i > 0 {
				hdr.WriteByte(',')
			}
			kj, _ := json.Marshal(k)
			vj, _ := json.Marshal(fields[k])
			hdr.Write(kj)
			hdr.WriteByte(':')
			hdr.Write(vj)
		}
		hdr.WriteByte('}')
	}
	opaque := javaOpaque.Add(1)
	hdr.WriteString(`,"flag":0,"language":"JAVA","opaque":` + strconv.Itoa(int(opaque)) + `,"serializeTypeCurrentRPC":"JSON","version":409}`)
	h := hdr.String()
	frame := make([]byte, 8, 8+len(h)+len(body))
	binary.BigEndian.PutUint32(frame[0:], uint32(4+len(h)+len(body)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(h)))
	frame = append(append(frame, h...), body...)

	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	for {
		var l [4]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			t.Fatalf("read response to %d: %v", code, err)
		}
		buf := make([]byte, binary.BigEndian.Uint32(l[:]))
		if _, err := io.ReadFull(conn, buf); err != nil {
			t.Fatal(err)
		}
		resp, err := protocol.DecodeFrame(buf)
		if err != nil {
			t.Fatalf("decode response to %d: %v", code, err)
		}
		if resp.Flag&protocol.FlagResponse != 0 && resp.Opaque == opaque {
			return resp
		}
	}
}
