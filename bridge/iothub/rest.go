package iothub

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
)

// The back end's HTTPS API, in IoT Hub's REST shape (docs/iothub.md):
//
//	GET    /devices                                list identities (?top=N)
//	POST   /devices                                bulk create/update/delete (rest_bulk.go)
//	PUT    /devices/{id}                           create (no If-Match) or update (If-Match): 200
//	GET    /devices/{id}                           read an identity
//	DELETE /devices/{id}                           delete (If-Match optional): 204
//	GET    /devices/{id}/modules                   list a device's modules
//	PUT    /devices/{id}/modules/{mid}             create or update a module: 200
//	GET    /devices/{id}/modules/{mid}             read a module
//	DELETE /devices/{id}/modules/{mid}             delete a module: 204
//	POST   /devices/{id}/messages/devicebound      send a cloud-to-device message (SmartGo's): 204
//	POST   /devices/query                          query twins (x-ms-max-item-count, x-ms-continuation)
//	GET    /twins/{id}[/modules/{mid}]             read a twin
//	PATCH  /twins/{id}[/modules/{mid}]             update tags and desired (If-Match optional)
//	PUT    /twins/{id}[/modules/{mid}]             replace tags and desired (If-Match optional)
//	POST   /twins/{id}[/modules/{mid}]/methods     invoke a direct method
//	GET    /statistics/devices                     device counts: total, enabled, disabled
//	GET    /statistics/service                     connected devices
//
// Path segments are URL-decoded; the api-version query parameter is
// accepted and not interpreted. Every request carries
// "Authorization: SharedAccessSignature sr={host}&sig=...&se=...&skn={policy}"
// signed with a configured policy's key; reading identities, twins and
// queries needs registryRead (or registryWrite), writing identities
// registryWrite, twin writes, methods and cloud-to-device messages
// serviceConnect. Errors answer IoT Hub's body,
//
//	{"Message":"ErrorCode:DeviceNotFound;device d1 not found","ExceptionMessage":"..."}
//
// which the service SDKs parse for the error code.

// apiTLS returns the TLS configuration of the HTTPS API and the AMQP
// endpoint (nil when neither listens).
func (h *Hub) apiTLS() (*tls.Config, error) {
	if len(h.opts.HTTPSListen) == 0 && len(h.opts.AMQPSListen) == 0 {
		return nil, nil
	}
	if h.opts.TLSConfig != nil {
		return h.opts.TLSConfig, nil
	}
	cert, err := tls.LoadX509KeyPair(h.opts.TLSCertFile, h.opts.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("iothub: API key pair: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// startHTTPS opens the API's listeners.
func (h *Hub) startHTTPS(cfg *tls.Config) error {
	if len(h.opts.HTTPSListen) == 0 {
		return nil
	}
	for _, addr := range h.opts.HTTPSListen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("iothub: HTTPS listen %s: %w", addr, err)
		}
		srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
			ErrorLog: ratelog.StdLogger(h.log, slog.LevelWarn, "iothub: HTTPS server error")}
		h.https = append(h.https, srv)
		h.lnAddrs = append(h.lnAddrs, ln.Addr())
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				h.log.Error("iothub: HTTPS server", "addr", addr, "err", err)
			}
		}()
	}
	return nil
}

// route is a parsed API path.
type route struct {
	kind     string // "devices", "device", "modules", "module", "c2d", "query", "twin", "methods", "stats", "servicestats"
	deviceID string
	moduleID string
}

// parseRoute splits an escaped request path.
func parseRoute(escaped string) (route, error) {
	var segs []string
	for s := range strings.SplitSeq(strings.Trim(escaped, "/"), "/") {
		u, err := url.PathUnescape(s)
		if err != nil {
			return route{}, fmt.Errorf("%w: path segment %q: %w", ErrBadRequest, truncate(s, 64), err)
		}
		segs = append(segs, u)
	}
	n := len(segs)
	switch {
	case n == 1 && segs[0] == "devices":
		return route{kind: "devices"}, nil
	case n == 2 && segs[0] == "devices" && segs[1] == "query":
		return route{kind: "query"}, nil
	case n == 2 && segs[0] == "devices":
		return route{kind: "device", deviceID: segs[1]}, nil
	case n == 3 && segs[0] == "devices" && segs[2] == "modules":
		return route{kind: "modules", deviceID: segs[1]}, nil
	case n == 4 && segs[0] == "devices" && segs[2] == "modules":
		return route{kind: "module", deviceID: segs[1], moduleID: segs[3]}, nil
	case n == 4 && segs[0] == "devices" && segs[2] == "messages" && strings.EqualFold(segs[3], "devicebound"):
		return route{kind: "c2d", deviceID: segs[1]}, nil
	case n == 2 && segs[0] == "twins":
		return route{kind: "twin", deviceID: segs[1]}, nil
	case n == 3 && segs[0] == "twins" && segs[2] == "methods":
		return route{kind: "methods", deviceID: segs[1]}, nil
	case n == 4 && segs[0] == "twins" && segs[2] == "modules":
		return route{kind: "twin", deviceID: segs[1], moduleID: segs[3]}, nil
	case n == 5 && segs[0] == "twins" && segs[2] == "modules" && segs[4] == "methods":
		return route{kind: "methods", deviceID: segs[1], moduleID: segs[3]}, nil
	case n == 2 && segs[0] == "statistics" && segs[1] == "devices":
		return route{kind: "stats"}, nil
	case n == 2 && segs[0] == "statistics" && segs[1] == "service":
		return route{kind: "servicestats"}, nil
	}
	return route{}, errNotFound
}

// errNotFound is an unknown path.
var errNotFound = errors.New("iothub: no such resource")

// permissions are what a request needs: any one of them.
func permissions(rt route, method string) []string {
	switch rt.kind {
	case "twin":
		if method == http.MethodGet {
			return []string{PermRegistryRead, PermServiceConnect}
		}
		return []string{PermServiceConnect}
	case "methods", "c2d", "servicestats":
		return []string{PermServiceConnect}
	case "query":
		return []string{PermRegistryRead, PermServiceConnect}
	}
	if method == http.MethodGet {
		return []string{PermRegistryRead}
	}
	return []string{PermRegistryWrite}
}

// ServeHTTP implements http.Handler: the API.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, err := parseRoute(r.URL.EscapedPath())
	if errors.Is(err, errNotFound) {
		h.writeError(w, r, http.StatusNotFound, "NotFound", "no resource at "+truncate(r.URL.Path, 128))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.authorizeAPI(r, permissions(rt, r.Method)); err != nil {
		h.writeError(w, r, http.StatusUnauthorized, "IotHubUnauthorizedAccess", err.Error())
		return
	}
	if !h.started.Load() {
		h.fail(w, r, ErrClosed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBody)
	switch {
	case rt.kind == "devices" && r.Method == http.MethodGet:
		h.listDevices(w, r)
	case rt.kind == "devices" && r.Method == http.MethodPost:
		h.bulkDevices(w, r)
	case rt.kind == "device" || rt.kind == "module":
		h.identity(w, r, rt)
	case rt.kind == "modules" && r.Method == http.MethodGet:
		h.listModules(w, r, rt)
	case rt.kind == "query" && r.Method == http.MethodPost:
		h.query(w, r)
	case rt.kind == "twin":
		h.twin(w, r, rt)
	case rt.kind == "methods" && r.Method == http.MethodPost:
		h.invoke(w, r, rt)
	case rt.kind == "c2d" && r.Method == http.MethodPost:
		h.c2d(w, r, rt)
	case (rt.kind == "stats" || rt.kind == "servicestats") && r.Method == http.MethodGet:
		h.statistics(w, r, rt.kind == "servicestats")
	default:
		w.Header().Set("Allow", allowed(rt.kind))
		h.writeError(w, r, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" is not supported on "+truncate(r.URL.Path, 128))
	}
}

func allowed(kind string) string {
	switch kind {
	case "device", "module":
		return "GET, PUT, DELETE"
	case "twin":
		return "GET, PATCH, PUT"
	case "devices":
		return "GET, POST"
	case "modules", "stats", "servicestats":
		return "GET"
	}
	return "POST"
}

// authorizeAPI checks a request's SAS token against the policies.
func (h *Hub) authorizeAPI(r *http.Request, perms []string) error {
	raw := r.Header.Get("Authorization")
	if raw == "" {
		return fmt.Errorf("%w: no Authorization header", ErrUnauthorized)
	}
	host := h.opts.HostName
	if host == "" {
		host, _, _ = strings.Cut(r.Host, ":")
	}
	p, _, err := h.policyToken(raw, host)
	if err != nil {
		return err
	}
	for _, perm := range perms {
		if p.has(perm) {
			return nil
		}
	}
	return fmt.Errorf("%w: policy %s lacks %s", ErrUnauthorized, p.Name, strings.Join(perms, " or "))
}

// policyToken checks a SAS token signed with a shared access policy's
// key for host ("" takes any resource) and returns the policy.
func (h *Hub) policyToken(raw, host string) (*Policy, *Token, error) {
	tok, err := ParseToken(raw)
	if err != nil {
		return nil, nil, err
	}
	p := h.policies[tok.KeyName]
	if tok.KeyName == "" || p == nil {
		return nil, nil, fmt.Errorf("%w: the token names no known policy (skn %q)", ErrUnauthorized, truncate(tok.KeyName, 64))
	}
	if err := tok.VerifyBase64(p.Key, time.Now()); err != nil {
		return nil, nil, err
	}
	if host != "" && !tok.Grants(host, "") {
		return nil, nil, fmt.Errorf("%w: the token's resource %q is not this hub (%s)", ErrUnauthorized, truncate(tok.Resource, 96), host)
	}
	return p, tok, nil
}

// readBody reads a request body (bounded by MaxBody).
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: request body over %d bytes", ErrTooLarge, mbe.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %w", ErrBadRequest, err)
	}
	return b, nil
}

// writeJSON answers status with a JSON body.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fail answers an error.
func (h *Hub) fail(w http.ResponseWriter, r *http.Request, err error) {
	st, code, text := statusOf(err)
	h.writeError(w, r, st, code, text)
}

// writeError answers IoT Hub's error body.
func (h *Hub) writeError(w http.ResponseWriter, r *http.Request, status int, code, text string) {
	h.logRefusal(r, status, code, text)
	// The SDKs split Message at ';' and ':'.
	text = strings.ReplaceAll(text, ";", ",")
	body, _ := json.Marshal(map[string]string{
		"Message":          "ErrorCode:" + code + ";" + text,
		"ExceptionMessage": "Tracking ID:" + randomHex(8) + "-TimestampUtc:" + time.Now().UTC().Format(time.RFC3339),
	})
	w.Header().Set("iothub-errorcode", code)
	writeJSON(w, status, body)
}

// logRefusal logs a failed API request (rate-limited: callers drive it).
func (h *Hub) logRefusal(r *http.Request, status int, code, text string) {
	if status >= 500 {
		h.log.Warn("iothub: API request failed", "method", r.Method, "path", truncate(r.URL.Path, 96), "status", status, "err", text)
	} else {
		h.log.Info("iothub: API request refused", "method", r.Method, "path", truncate(r.URL.Path, 96), "status", status,
			"reason", code, "err", text)
	}
}

// failMethod answers a failed direct method call. A device that is not
// online (404) or did not answer in time (504) gets IoT Hub's body for
// method errors: Message holds a JSON object with the numeric errorCode
// (404103, 504101), a tracking id, the text, info.timeout (the connect or
// response timeout waited, "hh:mm:ss") and timestampUtc; the
// iothub-errorcode header names the code. Other failures answer as every
// other request does.
func (h *Hub) failMethod(w http.ResponseWriter, r *http.Request, err error) {
	var me *methodError
	if !errors.As(err, &me) {
		h.fail(w, r, err)
		return
	}
	status, code, text := statusOf(err)
	h.logRefusal(r, status, code, text)
	now := time.Now().UTC()
	secs := int64(me.timeout / time.Second)
	inner, _ := json.Marshal(struct {
		ErrorCode  int               `json:"errorCode"`
		TrackingID string            `json:"trackingId"`
		Message    string            `json:"message"`
		Info       map[string]string `json:"info"`
		Timestamp  string            `json:"timestampUtc"`
	}{status*1000 + codeNumber(code), randomHex(16), strings.ReplaceAll(text, ";", ","),
		map[string]string{"timeout": fmt.Sprintf("%02d:%02d:%02d", secs/3600, secs/60%60, secs%60)},
		now.Format("2006-01-02T15:04:05.0000000Z")})
	body, _ := json.Marshal(map[string]string{"Message": string(inner), "ExceptionMessage": ""})
	w.Header().Set("iothub-errorcode", code)
	writeJSON(w, status, body)
}
