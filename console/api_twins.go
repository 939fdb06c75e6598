package console

import (
	"encoding/json"
	"errors"
	"net/http"

	twc "github.com/smartgo/smartgo/client/twin"
)

// Device and module twins, read-only, through the twin client API
// (client/twin): a page of device identities, and one twin document.
// While a shard's master is down they are read from its slave's replica
// (the last state it applied) and the answer carries PartialHeader.

// twinStale reports whether err is twc.ErrStale (the answer holds what
// a slave's replica had: a shard's master is down) and then sets
// PartialHeader to it; twin reads never fail for that alone.
func twinStale(w http.ResponseWriter, err error) bool {
	if err == nil || !errors.Is(err, twc.ErrStale) {
		return false
	}
	setPartial(w, err.Error())
	return true
}

// twinError maps the twin client's errors onto the API's statuses.
func twinError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, twc.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, twc.ErrInvalid), errors.Is(err, twc.ErrBadContinuation), errors.Is(err, twc.ErrBadOptions):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		fail(w, err)
	}
}

// apiDevices serves GET /api/twins: ?pageSize (1..1000, default 100),
// ?continuation from the previous page. Authentication (keys) is never
// shown.
func (c *Console) apiDevices(w http.ResponseWriter, r *http.Request, _ *session) {
	p := params{r: r}
	size := p.int("pageSize", 100, 1, 1000)
	if p.err != nil {
		fail(w, p.err)
		return
	}
	ctx, cancel := c.ctx(r)
	defer cancel()
	devs, next, err := c.twins.ListDevices(ctx, int(size), r.URL.Query().Get("continuation"))
	if err != nil && !twinStale(w, err) {
		twinError(w, err)
		return
	}
	for i := range devs {
		devs[i].Authentication = nil
	}
	if devs == nil {
		devs = []twc.Device{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"devices": devs, "continuation": next})
}

// apiTwin serves GET /api/twins/{device} (?module for a module twin).
func (c *Console) apiTwin(w http.ResponseWriter, r *http.Request, _ *session) {
	ctx, cancel := c.ctx(r)
	defer cancel()
	tw, err := c.twins.GetTwin(ctx, r.PathValue("device"), r.URL.Query().Get("module"))
	if err != nil && !twinStale(w, err) {
		twinError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deviceId": tw.DeviceID, "moduleId": tw.ModuleID, "etag": tw.Etag,
		"version": tw.Version, "twin": json.RawMessage(tw.JSON)})
}
