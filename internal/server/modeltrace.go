package server

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"mistralrs/internal/tracing"
)

// tracedModelOp runs a model-management operation (name: "unload",
// "reload", or "load" when a request loads an unloaded model; "" for a
// status query, which gets no span) in a span under the
// request's, when that span records.
func tracedModelOp(ctx context.Context, name, modelID string, op func() (string, error)) (string, error) {
	parent := trace.SpanFromContext(ctx)
	if name == "" || !parent.IsRecording() {
		return op()
	}
	_, sp := tracing.Tracer(ctx).Start(ctx, "model "+name+" "+modelID,
		trace.WithAttributes(attribute.String("mistralrs.model.operation", name), attribute.String("gen_ai.request.model", modelID)))
	defer sp.End()
	status, err := op()
	sp.SetAttributes(attribute.String("mistralrs.model.status", status))
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	return status, err
}
