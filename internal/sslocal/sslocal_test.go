package sslocal

import (
	"errors"
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
)

// A shard this broker does not serve (now) sends the router elsewhere or
// to try again; anything else is a failure of the request, and the
// broker's own error stays visible under the router's.
func TestRouterErr(t *testing.T) {
	if routerErr(nil) != nil {
		t.Fatal("nil error not kept")
	}
	for _, c := range []struct {
		err  error
		want error
	}{
		{fmt.Errorf("shard 3: %w", broker.ErrStateStoreNotOwner), router.ErrUnavailable},
		{fmt.Errorf("shard 1: %w", broker.ErrStateStoreUnavailable), router.ErrUnavailable},
		{fmt.Errorf("shard 2: %w", broker.ErrStateStoreFailed), router.ErrFailed},
		{errors.New("anything else"), router.ErrFailed},
	} {
		got := routerErr(c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("routerErr(%v) = %v, want %v wrapping it", c.err, got, c.want)
		}
		if c.want == router.ErrUnavailable && errors.Is(got, router.ErrFailed) {
			t.Errorf("routerErr(%v) = %v: also ErrFailed", c.err, got)
		}
	}
}
