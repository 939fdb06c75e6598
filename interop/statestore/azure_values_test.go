package statestore

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/iot-operations-sdks/go/services/statestore"
	ssErrors "github.com/Azure/iot-operations-sdks/go/services/statestore/errors"

	ss "github.com/smartgo/smartgo/statestore"
)

// TestStateStoreAzureSDKValues drives the Azure IoT Operations Go client
// with the values and keys at the edges: binary bytes that look like
// RESP, an empty value, and the largest key and value the store takes
// with its defaults. One byte more is the quota error the SDK maps, and
// the client carries on; the MQTT server's default packet limit must let
// the largest request through (it was 1 MiB, and a 1 MiB SET had the
// server close the connection with 0x95, which stops the Azure client for
// good), over the remote and the in-process path to the broker.
func TestStateStoreAzureSDKValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool
	}{{"remote", false}, {"local", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnvWith(t, false, tc.local)
			c := azureClient(t, e, "azure-values")
			bin := "a\r\nb\x00c$3\r\n*2\r\n\xff-ERR x\r\n"
			bigKey := strings.Repeat("k", ss.DefaultMaxKeySize)
			bigVal := strings.Repeat("v", ss.DefaultMaxValueSize)
			for _, kv := range []struct{ name, key, val string }{
				{"binary value", "bin", bin},
				{"binary key", bin, "for a binary key"},
				{"empty value", "empty", ""},
				{"largest key and value", bigKey, bigVal},
			} {
				set, err := c.Set(ctx10(t), kv.key, kv.val)
				if err != nil || !set.Value || set.Version.IsZero() {
					t.Fatalf("%s: set: %+v %v", kv.name, set, err)
				}
				get, err := c.Get(ctx10(t), kv.key)
				if err != nil || get.Value != kv.val || get.Version.Compare(set.Version) != 0 {
					t.Fatalf("%s: get: %d bytes, version %v (set %v), %v", kv.name, len(get.Value), get.Version, set.Version, err)
				}
			}
			for _, kv := range []struct{ name, key, val string }{
				{"value one byte over", "over", bigVal + "v"},
				{"key one byte over", bigKey + "k", "v"},
			} {
				if _, err := c.Set(ctx10(t), kv.key, kv.val); !errors.Is(err, ssErrors.QuotaExceeded) {
					t.Fatalf("%s: set: %v, want %q", kv.name, err, ssErrors.QuotaExceeded)
				}
			}
			if get, err := c.Get(ctx10(t), "over"); err != nil || !get.Version.IsZero() {
				t.Fatalf("refused value stored: %+v %v", get, err)
			}
			// The client is still connected and served.
			if r, err := c.Del(ctx10(t), bigKey); err != nil || r.Value != 1 {
				t.Fatalf("del largest: %+v %v", r, err)
			}
			if r, err := c.Set(ctx10(t), "after", "ok", statestore.WithCondition(statestore.NotExists)); err != nil || !r.Value {
				t.Fatalf("set after the refusals: %+v %v", r, err)
			}
		})
	}
}
