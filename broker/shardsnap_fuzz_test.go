package broker

import (
	"bytes"
	"testing"
)

// FuzzBrokerShardSnapshot: the wrapper of a state store or twin shard
// snapshot file (SGSSHARD / SGTSHARD), read at start, never panics on any
// bytes, and what it accepts is exactly what encodeShardSnapshot writes
// for the shard, offset and state it returns (nothing else passes the
// magic, shard id and CRC). The state inside goes to the shard's Restore,
// fuzzed by statestore's FuzzRestore and twin's FuzzTwinDecode.
func FuzzBrokerShardSnapshot(f *testing.F) {
	f.Add(encodeShardSnapshot(ssSnapMagic, 2, 7, []byte{0xAB}), false)
	f.Add(encodeShardSnapshot(twinSnapMagic, 2, 1<<40, []byte("state")), true)
	f.Add(encodeShardSnapshot(ssSnapMagic, 2, -1, nil), false)
	f.Add([]byte(ssSnapMagic), false)
	f.Fuzz(func(t *testing.T, b []byte, twin bool) {
		magic := ssSnapMagic
		if twin {
			magic = twinSnapMagic
		}
		next, state, err := decodeShardSnapshot(b, magic, 2)
		if err != nil {
			return
		}
		if next < 0 {
			t.Fatalf("negative offset %d accepted", next)
		}
		if again := encodeShardSnapshot(magic, 2, next, state); !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, which encodes back as %x", b, again)
		}
	})
}
