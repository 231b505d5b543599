package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// The wire path sends its OTLP/HTTP requests itself (httpSender) rather
// than through otlptracehttp's client: the client takes generated
// messages and marshals each batch into a fresh buffer, which for spans
// that are already encoded is a second copy of every byte into memory
// that must be allocated, zeroed and collected; on this project's
// machines that was a third of a traced call's CPU. The sender reads the
// same OTEL_EXPORTER_OTLP_* variables as the client, by the same rules
// (otlptracehttp's internal/otlpconfig), so that the run spans (the
// SDK's, through the client) and the call spans go to the same place
// the same way; TestSenderSendsAsTheClient checks it request by request.
// The variables of TLS (certificates, client keys) and INSECURE are left
// to the client: when one is set, the wire path sends through the client.

// otlpEnv is the OTLP exporter variables' prefix; a variable X is read
// as OTLP_X, then OTLP_TRACES_X over it.
const otlpEnv = "OTEL_EXPORTER_OTLP_"

// clientOnly are the variables only the client's path honours here.
var clientOnly = []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY", "INSECURE"}

// retryPolicy is the exponential back-off between attempts of a request
// that failed for a reason that may pass (otlptracehttp's retry.Config).
type retryPolicy struct {
	initial, max, elapsed time.Duration
}

// sdkRetry is otlptracehttp's default (retry.DefaultConfig).
var sdkRetry = retryPolicy{initial: 5 * time.Second, max: 30 * time.Second, elapsed: time.Minute}

// maxRequest and maxResponse are otlptracehttp's default bounds of a
// request's body and of the part of a response read.
const (
	maxRequest  = 64 << 20
	maxResponse = 4 << 20
)

// httpSender posts OTLP/HTTP protobuf requests whose bodies are built by
// the caller.
type httpSender struct {
	url     string
	headers map[string]string
	gzip    bool
	client  *http.Client
	retry   retryPolicy
	// stop is closed at shutdown (once): a request waiting to be tried
	// again gives up.
	stop     chan struct{}
	stopOnce sync.Once
	// zips holds compressors and their buffers: a batcher per scope
	// sends, each on its own goroutine.
	zips sync.Pool
}

// zipped is a body compressed with gzip, and the compressor.
type zipped struct {
	w   *gzip.Writer
	buf bytes.Buffer
}

// httpSenderFrom returns the sender of the variables get reads, or nil
// when one of clientOnly is set or the endpoint is not an http or https
// URL with a host (the client's path then serves). A value the client
// would ignore with a log line (an endpoint that is not a URL, a timeout
// that is not a number of milliseconds) is refused.
func httpSenderFrom(get func(string) string) (*httpSender, error) {
	for _, k := range clientOnly {
		if get(otlpEnv+k) != "" || get(otlpEnv+"TRACES_"+k) != "" {
			return nil, nil
		}
	}
	s := &httpSender{retry: sdkRetry, stop: make(chan struct{}), headers: map[string]string{}}
	// The client's default endpoint, secure unless the URL says http.
	scheme, host, urlPath := "https", "localhost:4318", "/v1/traces"
	timeout := 10 * time.Second
	for _, signal := range []string{"", "TRACES_"} {
		if v := get(otlpEnv + signal + "ENDPOINT"); v != "" {
			u, err := url.Parse(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s%sENDPOINT=%q is not a URL: %v", ErrConfig, otlpEnv, signal, v, err)
			}
			switch strings.ToLower(u.Scheme) {
			case "http":
				scheme = "http"
			case "https":
				scheme = "https"
			default:
				return nil, nil
			}
			if u.Host == "" {
				return nil, nil
			}
			host = u.Host
			if signal == "" {
				// A base URL: the traces' path is under it.
				urlPath = path.Join(u.Path, "/v1/traces")
			} else {
				// The traces' URL, as it is; the root when it has no path.
				urlPath = u.Path
				if urlPath == "" {
					urlPath = "/"
				}
			}
		}
		if v := get(otlpEnv + signal + "HEADERS"); v != "" {
			s.headers = parseHeaders(v)
		}
		if v := get(otlpEnv + signal + "COMPRESSION"); v != "" {
			s.gzip = v == "gzip"
		}
		if v := get(otlpEnv + signal + "TIMEOUT"); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s%sTIMEOUT=%q is not a number of milliseconds", ErrConfig, otlpEnv, signal, v)
			}
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if p := strings.TrimSpace(urlPath); p == "" || p == "." {
		urlPath = "/v1/traces"
	} else if !path.IsAbs(p) {
		urlPath = "/" + p
	}
	s.url = (&url.URL{Scheme: scheme, Host: host, Path: urlPath}).String()
	// The client's transport: the default one's settings (proxy from the
	// environment, dial and idle timeouts, HTTP/2 when offered).
	s.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: timeout}
	return s, nil
}

// parseHeaders reads "key=value,..." as the client does: keys trimmed and
// checked to be HTTP tokens, values URL-unescaped and trimmed; a pair it
// cannot read is left out.
func parseHeaders(v string) map[string]string {
	h := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if !isToken(k) {
			continue
		}
		val, err := url.PathUnescape(val)
		if err != nil {
			continue
		}
		h[k] = strings.TrimSpace(val)
	}
	return h
}

func isToken(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > unicode.MaxASCII || !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// userAgent names the sender; the client's reads "OTel OTLP Exporter
// Go/<version>".
var userAgent = "agentrt OTLP exporter (OTel Go/" + otlptrace.Version() + ")"

// send posts body, an ExportTraceServiceRequest, trying again after a
// failure that may pass (a 429, 502, 503 or 504 answer, honouring its
// Retry-After, or a temporary network error) as the client does, until
// the retry policy's time is spent, ctx ends or the sender stops.
func (s *httpSender) send(ctx context.Context, body []byte) error {
	if len(body) > maxRequest {
		return fmt.Errorf("tracing: OTLP request of %d bytes is over the %d-byte bound; nothing was sent", len(body), maxRequest)
	}
	if s.gzip {
		z, _ := s.zips.Get().(*zipped)
		if z == nil {
			z = &zipped{}
			z.w = gzip.NewWriter(&z.buf)
		}
		defer s.zips.Put(z)
		z.buf.Reset()
		z.w.Reset(&z.buf)
		if _, err := z.w.Write(body); err != nil {
			return err
		}
		if err := z.w.Close(); err != nil {
			return err
		}
		body = z.buf.Bytes()
	}
	start := time.Now()
	interval := s.retry.initial
	for {
		throttle, retry, err := s.post(ctx, body)
		if !retry {
			return err
		}
		// The back-off's randomized interval (±50 %, growing by half each
		// time up to the maximum), or the server's Retry-After if longer.
		wait := time.Duration(float64(interval) * (0.5 + rand.Float64()))
		interval = min(interval*3/2, s.retry.max)
		wait = max(wait, throttle)
		if time.Since(start)+wait > s.retry.elapsed {
			return fmt.Errorf("tracing: OTLP export gave up after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-s.stop:
			t.Stop()
			return err
		}
	}
}

// post makes one attempt. retry says the failure may pass; throttle is
// the server's Retry-After.
func (s *httpSender) post(ctx context.Context, body []byte) (throttle time.Duration, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("User-Agent", userAgent)
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if s.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		return 0, errors.As(err, &ue) && ue.Temporary(), err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, false, err
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		if len(data) == 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			return 0, false, nil
		}
		var r coltracepb.ExportTraceServiceResponse
		if err := proto.Unmarshal(data, &r); err != nil {
			return 0, false, fmt.Errorf("tracing: the OTLP receiver's answer: %w", err)
		}
		if p := r.GetPartialSuccess(); p != nil && (p.GetRejectedSpans() != 0 || p.GetErrorMessage() != "") {
			return 0, false, fmt.Errorf("tracing: the OTLP receiver rejected %d spans: %s", p.GetRejectedSpans(), p.GetErrorMessage())
		}
		return 0, false, nil
	case code == http.StatusTooManyRequests, code == http.StatusBadGateway,
		code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), true, fmt.Errorf("tracing: OTLP export to %s: %s (body: %s)", s.url, resp.Status, answer(data))
	default:
		return 0, false, fmt.Errorf("tracing: OTLP export to %s: %s (body: %s)", s.url, resp.Status, answer(data))
	}
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, int64(time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func answer(data []byte) string {
	if s := strings.TrimSpace(string(data)); s != "" {
		return s
	}
	return "(empty)"
}

// close stops a request waiting to be tried again and lets the idle
// connections go.
func (s *httpSender) close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.client.CloseIdleConnections()
}
