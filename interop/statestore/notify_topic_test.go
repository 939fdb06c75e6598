package statestore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ssErrors "github.com/Azure/iot-operations-sdks/go/services/statestore/errors"

	ss "github.com/smartgo/smartgo/statestore"
)

// TestStateStoreAzureSDKKeyNotifyLongKey watches, with the Azure IoT
// Operations Go client, the longest key whose notification topic (the
// client id and the key in hex) MQTT can carry, and one byte more. The
// longer one, a valid key of the store, was accepted and then every
// notification of it was dropped by the MQTT server ("topic name longer
// than 65535 bytes"): the watcher waited for changes that never came. It
// is refused with the quota error now; the longest one is notified.
func TestStateStoreAzureSDKKeyNotifyLongKey(t *testing.T) {
	eachFront(t, func(t *testing.T, ctx context.Context, e *env) {
		const id = "azure-long-key-watcher"
		w := azureClient(t, e, id)
		c := azureClient(t, e, "azure-long-key-writer")
		longest := (ss.MaxTopicLen - ss.NotifyTopicLen(len(id), 0)) / 2
		fits, over := strings.Repeat("k", longest), strings.Repeat("k", longest+1)

		if err := w.KeyNotify(ctx, over); !errors.Is(err, ssErrors.QuotaExceeded) {
			t.Fatalf("keynotify of a %d-byte key: %v, want %q", len(over), err, ssErrors.QuotaExceeded)
		}
		ch, stop := w.Notify(fits)
		defer stop()
		if err := w.KeyNotify(ctx, fits); err != nil {
			t.Fatalf("keynotify of a %d-byte key: %v", len(fits), err)
		}
		for _, key := range []string{over, fits} {
			if set, err := c.Set(ctx, key, "v"); err != nil || !set.Value {
				t.Fatalf("set of a %d-byte key: %+v %v", len(key), set, err)
			}
		}
		select {
		case n := <-ch:
			if n.Operation != "SET" || n.Key != fits || n.Value != "v" {
				t.Fatalf("notification %s of a %d-byte key, value %q", n.Operation, len(n.Key), n.Value)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification of the %d-byte key", len(fits))
		}
		// The watcher is still served.
		if get, err := w.Get(ctx, over); err != nil || get.Value != "v" {
			t.Fatalf("get: %d bytes, %v", len(get.Value), err)
		}
	})
}
