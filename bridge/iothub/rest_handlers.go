package iothub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	tw "github.com/smartgo/smartgo/twin"
)

// maxListTop bounds GET /devices?top=.
const maxListTop = 1000

// decodeJSON decodes a request body into v.
func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: the body is not the expected JSON: %w", ErrBadRequest, err)
	}
	return nil
}

// respond answers 200 with v as JSON, and its etag (quoted) when given.
func respond(w http.ResponseWriter, v any, etag string) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding the answer failed", http.StatusInternalServerError)
		return
	}
	if etag != "" {
		w.Header().Set("ETag", `"`+etag+`"`)
	}
	writeJSON(w, http.StatusOK, body)
}

// identity serves /devices/{id} and /devices/{id}/modules/{mid}.
func (h *Hub) identity(w http.ResponseWriter, r *http.Request, rt route) {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	ifMatch := r.Header.Get("If-Match")
	switch r.Method {
	case http.MethodGet:
		var v any
		var etag string
		var err error
		if rt.moduleID == "" {
			var d *twincli.Device
			if d, err = h.twins.GetDevice(ctx, rt.deviceID); err == nil {
				v, etag = d, d.Etag
			}
		} else {
			var m *twincli.Module
			if m, err = h.twins.GetModule(ctx, rt.deviceID, rt.moduleID); err == nil {
				v, etag = m, m.Etag
			}
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		respond(w, v, etag)
	case http.MethodPut:
		// IoT Hub's PUT: no If-Match creates, If-Match updates.
		mode := twincli.PutCreate
		if _, ok := r.Header["If-Match"]; ok {
			mode = twincli.PutUpdate
		}
		h.putIdentity(w, r, rt, mode, ifMatch)
	case http.MethodDelete:
		var err error
		if rt.moduleID == "" {
			err = h.deleteDevice(ctx, rt.deviceID, ifMatch)
		} else if err = h.twins.DeleteModule(ctx, rt.deviceID, rt.moduleID, ifMatch); err == nil {
			h.endSession(ctx, Identity{DeviceID: rt.deviceID, ModuleID: rt.moduleID}.ClientID())
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", allowed(rt.kind))
		h.writeError(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not supported here")
	}
}

// putIdentity creates or updates a device or module; the answer is 200
// (the Python SDK refuses 201).
func (h *Hub) putIdentity(w http.ResponseWriter, r *http.Request, rt route, mode twincli.PutMode, ifMatch string) {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	if rt.moduleID == "" {
		var d twincli.Device
		if err := decodeJSON(r, &d); err != nil {
			h.fail(w, r, err)
			return
		}
		if d.DeviceID != "" && d.DeviceID != rt.deviceID {
			h.fail(w, r, fmt.Errorf("%w: deviceId %q in the body differs from the path's %q", ErrBadRequest, truncate(d.DeviceID, 64), rt.deviceID))
			return
		}
		d.DeviceID = rt.deviceID
		got, err := h.twins.PutDevice(ctx, &d, mode, ifMatch)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		// A device it created has its session for cloud-to-device
		// messages (twincli.Options.PrepareC2D, set by Start).
		respond(w, got, got.Etag)
		return
	}
	var m twincli.Module
	if err := decodeJSON(r, &m); err != nil {
		h.fail(w, r, err)
		return
	}
	if m.DeviceID != "" && m.DeviceID != rt.deviceID || m.ModuleID != "" && m.ModuleID != rt.moduleID {
		h.fail(w, r, fmt.Errorf("%w: the body names another module than the path", ErrBadRequest))
		return
	}
	m.DeviceID, m.ModuleID = rt.deviceID, rt.moduleID
	got, err := h.twins.PutModule(ctx, &m, mode, ifMatch)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	respond(w, got, got.Etag)
}

// listDevices serves GET /devices?top=N.
func (h *Hub) listDevices(w http.ResponseWriter, r *http.Request) {
	top := maxListTop
	if s := r.URL.Query().Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxListTop {
			h.fail(w, r, fmt.Errorf("%w: top %q must be 1 to %d", ErrBadRequest, truncate(s, 16), maxListTop))
			return
		}
		top = n
	}
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	out := []twincli.Device{}
	cont := ""
	for len(out) < top {
		page, next, err := h.twins.ListDevices(ctx, top-len(out), cont)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out = append(out, page...)
		if next == "" {
			break
		}
		cont = next
	}
	respond(w, out, "")
}

// listModules serves GET /devices/{id}/modules.
func (h *Hub) listModules(w http.ResponseWriter, r *http.Request, rt route) {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	mods, err := h.twins.ListModules(ctx, rt.deviceID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if mods == nil {
		mods = []twincli.Module{}
	}
	respond(w, mods, "")
}

// query serves POST /devices/query: a page of results, with
// x-ms-item-type ("twin" for SELECT *, "raw" for projections and counts)
// and x-ms-continuation when more pages follow.
func (h *Hub) query(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Query string `json:"query"`
	}
	if err := decodeJSON(r, &body); err != nil {
		h.fail(w, r, err)
		return
	}
	q, err := tw.ParseQuery(body.Query)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	opts := twincli.QueryOptions{Continuation: r.Header.Get("x-ms-continuation")}
	if s := r.Header.Get("x-ms-max-item-count"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			h.fail(w, r, fmt.Errorf("%w: x-ms-max-item-count %q", ErrBadRequest, truncate(s, 16)))
			return
		}
		opts.PageSize = min(n, maxListTop)
	}
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	page, err := h.twins.Query(ctx, body.Query, opts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	items := page.Items
	if items == nil {
		items = []json.RawMessage{}
	}
	kind := "raw"
	if q.Star && !page.Aggregate {
		kind = "twin"
	}
	w.Header().Set("x-ms-item-type", kind)
	if page.Continuation != "" {
		w.Header().Set("x-ms-continuation", page.Continuation)
	}
	respond(w, items, "")
}

// statistics serves GET /statistics/devices (totalDeviceCount,
// enabledDeviceCount, disabledDeviceCount) and, with service,
// /statistics/service (connectedDeviceCount), counted by twin queries
// over the device identities (modules are not counted, as on IoT Hub).
func (h *Hub) statistics(w http.ResponseWriter, r *http.Request, service bool) {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	count := func(where string) (int64, error) {
		page, err := h.twins.Query(ctx, "SELECT COUNT() AS n FROM devices"+where, twincli.QueryOptions{})
		if err != nil {
			return 0, err
		}
		var row struct{ N int64 }
		if len(page.Items) > 0 {
			if err := json.Unmarshal(page.Items[0], &row); err != nil {
				return 0, fmt.Errorf("iothub: statistics: %w", err)
			}
		}
		return row.N, nil
	}
	wheres := map[string]string{"totalDeviceCount": "", "enabledDeviceCount": " WHERE status = 'enabled'",
		"disabledDeviceCount": " WHERE status = 'disabled'"}
	if service {
		wheres = map[string]string{"connectedDeviceCount": " WHERE connectionState = 'Connected'"}
	}
	out := make(map[string]int64, len(wheres))
	for name, where := range wheres {
		n, err := count(where)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out[name] = n
	}
	respond(w, out, "")
}

// twin serves /twins/{id}[/modules/{mid}].
func (h *Hub) twin(w http.ResponseWriter, r *http.Request, rt route) {
	ctx, cancel := h.requestCtx(r.Context())
	defer cancel()
	var t *twincli.Twin
	var err error
	switch r.Method {
	case http.MethodGet:
		t, err = h.twins.GetTwin(ctx, rt.deviceID, rt.moduleID)
	case http.MethodPatch, http.MethodPut:
		var body []byte
		if body, err = readBody(r); err != nil {
			break
		}
		if r.Method == http.MethodPatch {
			t, err = h.twins.UpdateTwin(ctx, rt.deviceID, rt.moduleID, body, r.Header.Get("If-Match"))
		} else {
			t, err = h.twins.ReplaceTwin(ctx, rt.deviceID, rt.moduleID, body, r.Header.Get("If-Match"))
		}
	default:
		w.Header().Set("Allow", allowed(rt.kind))
		h.writeError(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not supported here")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", `"`+t.Etag+`"`)
	writeJSON(w, http.StatusOK, t.JSON)
}

// methodRequest is the body of POST /twins/{id}/methods.
type methodRequest struct {
	MethodName      string          `json:"methodName"`
	ResponseTimeout *int            `json:"responseTimeoutInSeconds"`
	ConnectTimeout  *int            `json:"connectTimeoutInSeconds"`
	Payload         json.RawMessage `json:"payload"`
}

// invoke serves POST /twins/{id}[/modules/{mid}]/methods: 200 with
// {"status":...,"payload":...} once the device answered.
func (h *Hub) invoke(w http.ResponseWriter, r *http.Request, rt route) {
	var req methodRequest
	if err := decodeJSON(r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	c := MethodCall{Name: req.MethodName, Payload: req.Payload}
	maxSec := int(h.opts.MaxMethodTimeout / time.Second)
	for _, p := range []struct {
		v    *int
		min  int
		dst  *time.Duration
		name string
	}{{req.ResponseTimeout, 1, &c.ResponseTimeout, "responseTimeoutInSeconds"}, {req.ConnectTimeout, 0, &c.ConnectTimeout, "connectTimeoutInSeconds"}} {
		if p.v == nil {
			continue
		}
		if *p.v < p.min || *p.v > maxSec {
			h.fail(w, r, fmt.Errorf("%w: %s %d outside %d..%d", ErrBadRequest, p.name, *p.v, p.min, maxSec))
			return
		}
		*p.dst = time.Duration(*p.v) * time.Second
	}
	id := Identity{DeviceID: rt.deviceID, ModuleID: rt.moduleID}
	if h.opts.DeviceAuth == AuthRegistry {
		if err := h.exists(r.Context(), id); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	res, err := h.InvokeMethod(r.Context(), id, c)
	if err != nil {
		h.failMethod(w, r, err)
		return
	}
	var out bytes.Buffer
	out.WriteString(`{"status":`)
	out.WriteString(strconv.Itoa(res.Status))
	out.WriteString(`,"payload":`)
	out.Write(res.Payload)
	out.WriteString("}")
	writeJSON(w, http.StatusOK, out.Bytes())
}

// c2d serves POST /devices/{id}/messages/devicebound: the body is the
// message; iothub-messageid, iothub-correlationid, iothub-userid,
// iothub-expiry (RFC 3339), Content-Type, Content-Encoding and
// iothub-app-{name} headers set its properties. 204, with the message id
// in iothub-messageid.
func (h *Hub) c2d(w http.ResponseWriter, r *http.Request, rt route) {
	body, err := readBody(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c := &C2DMessage{DeviceID: rt.deviceID, Body: body, MessageID: r.Header.Get("iothub-messageid"),
		CorrelationID: r.Header.Get("iothub-correlationid"), UserID: r.Header.Get("iothub-userid"),
		ContentType: r.Header.Get("Content-Type"), Encoding: r.Header.Get("Content-Encoding")}
	if s := r.Header.Get("iothub-expiry"); s != "" {
		if c.Expiry, err = time.Parse(time.RFC3339, s); err != nil {
			h.fail(w, r, fmt.Errorf("%w: iothub-expiry %q is not an RFC 3339 time", ErrBadRequest, truncate(s, 40)))
			return
		}
	}
	for k, vs := range r.Header {
		name, ok := strings.CutPrefix(strings.ToLower(k), "iothub-app-")
		if ok && name != "" && len(vs) > 0 {
			c.Properties = append(c.Properties, Property{name, vs[0]})
		}
	}
	slices.SortFunc(c.Properties, func(a, b Property) int { return strings.Compare(a.Name, b.Name) })
	if err := h.SendC2D(r.Context(), c); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("iothub-messageid", c.MessageID)
	w.WriteHeader(http.StatusNoContent)
}

// exists fails with the registry's 404 when the identity is not
// registered (other failures are left to the call that follows).
func (h *Hub) exists(ctx context.Context, id Identity) error {
	if _, _, err := h.identityState(ctx, id); errors.Is(err, twincli.ErrNotFound) {
		return err
	}
	return nil
}
