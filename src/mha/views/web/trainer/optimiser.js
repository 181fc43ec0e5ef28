// One optimiser step as the package's trainer (mha.lab.training.train) takes it: clip the gradients to a global
// norm with torch.nn.utils.clip_grad_norm_'s semantics, then AdamW with torch.optim.AdamW's (decoupled weight decay
// on every parameter, bias-corrected moments, eps added to the corrected root), at a learning rate warmed up
// linearly as the package's LambdaLR does: step s (from 1) uses lr * min(1, s / max(warmup_steps, 1)).

// Scale `gradient` (Float32Array) in place so its 2-norm is at most maxNorm: coefficient maxNorm / (norm + 1e-6),
// capped at 1 and applied always, as torch does. Returns the norm before clipping.
export function clipGradientNorm(gradient, maxNorm) {
  var squares = 0;
  for (var i = 0; i < gradient.length; i++) squares += gradient[i] * gradient[i];
  var norm = Math.fround(Math.sqrt(squares));
  var coefficient = Math.min(Math.fround(Math.fround(maxNorm) / Math.fround(norm + 1e-6)), 1);
  for (i = 0; i < gradient.length; i++) gradient[i] = gradient[i] * coefficient;
  return norm;
}

// The learning rate of step `step` (1, 2, ...).
export function learningRateAt(step, learningRate, warmupSteps) {
  return learningRate * Math.min(1, step / Math.max(warmupSteps || 0, 1));
}

// AdamW over a flat Float32Array of parameters: {step(values, gradient, learningRate)}, its moments kept inside.
// options: {betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01}.
export function adamW(size, options) {
  options = options || {};
  var betas = options.betas || [0.9, 0.999], eps = options.eps === undefined ? 1e-8 : options.eps;
  var weightDecay = options.weightDecay === undefined ? 0.01 : options.weightDecay;
  if (!(betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1)) {
    throw new Error("betas must be two numbers in [0, 1), e.g. [0.9, 0.999], got " + JSON.stringify(betas) + ".");
  }
  var exp = new Float32Array(size), expSquared = new Float32Array(size), count = 0;
  return {
    state: function () { return { step: count, exp_avg: exp, exp_avg_sq: expSquared }; },
    step: function (values, gradient, learningRate) {
      count += 1;
      var decay = Math.fround(1 - learningRate * weightDecay);
      var correction1 = 1 - Math.pow(betas[0], count), root2 = Math.sqrt(1 - Math.pow(betas[1], count));
      var stepSize = learningRate / correction1, fr = Math.fround;
      for (var i = 0; i < size; i++) {
        var g = gradient[i];
        values[i] = values[i] * decay;
        exp[i] = exp[i] + fr((g - exp[i]) * fr(1 - betas[0]));
        expSquared[i] = fr(expSquared[i] * fr(betas[1])) + fr(fr(g * g) * fr(1 - betas[1]));
        var denominator = fr(fr(Math.sqrt(expSquared[i]) / fr(root2)) + fr(eps));
        values[i] = values[i] - fr(fr(exp[i] / denominator) * fr(stepSize));
      }
    },
  };
}
