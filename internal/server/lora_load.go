package server

// loadLoRAFile reads adapter files for the served models. It is nil until
// internal/lora's Load is wired here; a model with a LoRA runtime then
// refuses every adapter file with a clear error.
var loadLoRAFile loraLoadFunc
