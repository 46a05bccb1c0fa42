package responses

import (
	"errors"
	"net/http"

	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/server/openai"
)

// bodySink answers a response in one JSON body.
type bodySink struct {
	a   *API
	w   http.ResponseWriter
	r   *http.Request
	p   *job
	lps openai.Logprobs
	all []openai.TokenLogprob
}

func (s *bodySink) Output(o engine.Output, _ string) error {
	if l := s.lps.Of(o); l != nil {
		s.all = append(s.all, *l)
	}
	return nil
}

func (s *bodySink) Finish(end *gen.End) (bool, error) {
	res := end.Choices[0].Result
	text, msg, fcs := s.p.output(res, s.all)
	obj, conv := s.p.finish(respCompleted, res, text, msg, fcs)
	if s.p.store {
		s.a.store.add(&storedResponse{id: s.p.id, obj: obj, msgs: conv})
	}
	s.a.b.Respond(s.w, s.r, obj)
	return false, nil
}

func (s *bodySink) Fail(err error) {
	var re *gen.Error
	if !errors.As(err, &re) && s.p.store {
		// A failed generation is kept, as mistral.rs keeps it.
		obj := s.p.object(respFailed)
		obj.Error = &responseErrorJSON{Code: "server_error", Message: err.Error()}
		s.a.store.add(&storedResponse{id: s.p.id, obj: obj})
	}
	s.a.b.WriteError(s.w, s.r, gen.OpenAI, err)
}

// Canceled answers a response whose generation the server canceled while
// the client was there: status failed with a server_error naming the
// cause, the text so far in an incomplete message item, and the usage. It
// is stored (when store is on) as failed, so it cannot be continued.
func (s *bodySink) Canceled(m string, end *gen.End) {
	observe.SetError(s.r.Context(), m)
	_ = s.a.b.PayloadLog.ErrorCtx(s.r.Context(), m)
	res := end.Choices[0].Result
	obj, _ := s.p.finish(respFailed, res, res.Text, newMessageItem("incomplete", res.Text, s.all), nil)
	obj.Error = &responseErrorJSON{Code: "server_error", Message: m}
	if s.p.store {
		s.a.store.add(&storedResponse{id: s.p.id, obj: obj})
	}
	s.a.b.Respond(s.w, s.r, obj)
}
