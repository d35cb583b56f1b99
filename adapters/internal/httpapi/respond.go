package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// contentTypeJSON is shared by every response: net/http never modifies a
// header value slice, so assigning it directly saves an allocation per call.
var contentTypeJSON = []string{"application/json"}

// bufPool holds the buffers of the hot paths, which skip encoding/json's
// reflection: the hand-written response bodies (deduct, release, errors)
// and the deduct request body.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// writeRaw sends body with status. net/http sets Content-Length itself since
// the whole body goes out in one Write before the handler returns.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = contentTypeJSON
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// putBuf returns bp to the pool, holding b, what was built in it.
func putBuf(bp *[]byte, b []byte) {
	if cap(b) <= 4<<10 { // do not pin a buffer grown by a huge detail or body
		*bp = b[:0]
		bufPool.Put(bp)
	}
}

// sendBuf writes b, built in *bp, and returns the buffer to the pool.
func sendBuf(w http.ResponseWriter, status int, bp *[]byte, b []byte) {
	writeRaw(w, status, b)
	putBuf(bp, b)
}

// writeJSON encodes v with encoding/json, for the paths off the hot one.
func (s *server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own response types get here: a bug
		s.log.Error("httpapi: encode response", "err", err)
		s.writeError(w, http.StatusInternalServerError, string(domain.CodeInternal), detailInternal)
		return
	}
	writeRaw(w, status, b)
}

// writeError sends {"error":code,"detail":detail}.
func (s *server) writeError(w http.ResponseWriter, status int, code, detail string) {
	s.writeFieldError(w, status, code, detail, "")
}

// writeFieldError sends {"error":code,"detail":detail,"field":field,
// "trace_id":id}; field names the input at fault and is left out when
// empty, and trace_id is the request's X-Request-Id, which ServeHTTP set
// on w.
func (s *server) writeFieldError(w http.ResponseWriter, status int, code, detail, field string) {
	var traceID string
	if ids := w.Header()[wire.HeaderRequestID]; len(ids) == 1 {
		traceID = ids[0]
	}
	bp := getBuf()
	sendBuf(w, status, bp, appendError((*bp)[:0], code, detail, field, traceID))
}

func appendError(b []byte, code, detail, field, traceID string) []byte {
	b = append(b, `{"error":`...)
	b = appendJSONString(b, code)
	if detail != "" {
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, detail)
	}
	if field != "" {
		b = append(b, `,"field":`...)
		b = appendJSONString(b, field)
	}
	if traceID != "" {
		b = append(b, `,"trace_id":`...)
		b = appendJSONString(b, traceID)
	}
	return append(b, '}')
}

// appendDeductReceipt writes the deduct success body. A replayed request
// gets the identical receipt from Redis, hence the byte-identical body.
func appendDeductReceipt(b []byte, seq, remaining int64, eventID string) []byte {
	b = append(b, `{"status":"ok","seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, `,"event_id":`...)
	b = appendJSONString(b, eventID)
	return append(b, '}')
}

func appendReleaseReceipt(b []byte, eventID string, seq int64, already bool) []byte {
	b = append(b, `{"status":"released","event_id":`...)
	b = appendJSONString(b, eventID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"already_released":`...)
	b = strconv.AppendBool(b, already)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Like encoding/json it
// escapes control characters, U+2028 and U+2029, and replaces invalid UTF-8
// with U+FFFD, so any input yields valid JSON.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
