;; The matrix product that model.js runs with WebAssembly SIMD (f32x4); model.js embeds the compiled bytes.
;; Rebuild: wat2wasm src/mha/views/web/model_matmul.wat -o kernel.wasm && base64 -w0 kernel.wasm
;; and paste the result into KERNEL_WASM_BASE64 in model.js (tests/site/test_web_model.py checks that they agree).
;;
;; matmul(x, w, b, out, n, d_in, d_out) writes out (n, d_out) = x (n, d_in) @ W (d_in, d_out) + b (d_out,).
;; Arguments are byte offsets into the imported memory, all float32; d_out is a multiple of 8.
;; W is packed in panels of 8 columns: element (k, 8p + c) lies at w + 4 * ((p * d_in + k) * 8 + c),
;; so the loop over k reads one panel front to back.
;; Every output element is the sum over k = 0, 1, ... of x[i, k] * W[k, j], rounded to float32 after each
;; product and each sum, plus b[j] at the end: exactly what model.js's plain-JavaScript fallback computes.
;; Rows go four at a time (eight accumulators of four lanes), then one at a time for the rest.
(module
  (import "env" "memory" (memory 1))
  (func (export "matmul")
    (param $x i32) (param $w i32) (param $b i32) (param $out i32)
    (param $n i32) (param $d_in i32) (param $d_out i32)
    (local $row_bytes i32) (local $out_row_bytes i32) (local $panel_bytes i32)
    (local $panel i32) (local $panels i32) (local $i i32)
    (local $wp i32) (local $w_end i32) (local $xk i32) (local $op i32)
    (local $r1 i32) (local $r2 i32) (local $r3 i32)
    (local $bias0 v128) (local $bias1 v128) (local $w0 v128) (local $w1 v128) (local $a v128)
    (local $c00 v128) (local $c01 v128) (local $c10 v128) (local $c11 v128)
    (local $c20 v128) (local $c21 v128) (local $c30 v128) (local $c31 v128)
    (local.set $row_bytes (i32.shl (local.get $d_in) (i32.const 2)))
    (local.set $out_row_bytes (i32.shl (local.get $d_out) (i32.const 2)))
    (local.set $panel_bytes (i32.shl (local.get $d_in) (i32.const 5)))
    (local.set $r1 (local.get $row_bytes))
    (local.set $r2 (i32.shl (local.get $row_bytes) (i32.const 1)))
    (local.set $r3 (i32.add (local.get $r2) (local.get $row_bytes)))
    (local.set $panels (i32.shr_u (local.get $d_out) (i32.const 3)))
    (local.set $panel (i32.const 0))
    (block $panels_done
      (loop $panel_loop
        (br_if $panels_done (i32.ge_u (local.get $panel) (local.get $panels)))
        (local.set $bias0 (v128.load (i32.add (local.get $b) (i32.shl (local.get $panel) (i32.const 5)))))
        (local.set $bias1 (v128.load offset=16 (i32.add (local.get $b) (i32.shl (local.get $panel) (i32.const 5)))))
        (local.set $i (i32.const 0))
        ;; four rows at a time
        (block $rows4_done
          (loop $rows4
            (br_if $rows4_done (i32.gt_u (i32.add (local.get $i) (i32.const 4)) (local.get $n)))
            (local.set $c00 (v128.const i32x4 0 0 0 0)) (local.set $c01 (v128.const i32x4 0 0 0 0))
            (local.set $c10 (v128.const i32x4 0 0 0 0)) (local.set $c11 (v128.const i32x4 0 0 0 0))
            (local.set $c20 (v128.const i32x4 0 0 0 0)) (local.set $c21 (v128.const i32x4 0 0 0 0))
            (local.set $c30 (v128.const i32x4 0 0 0 0)) (local.set $c31 (v128.const i32x4 0 0 0 0))
            (local.set $wp (i32.add (local.get $w) (i32.mul (local.get $panel) (local.get $panel_bytes))))
            (local.set $w_end (i32.add (local.get $wp) (local.get $panel_bytes)))
            (local.set $xk (i32.add (local.get $x) (i32.mul (local.get $i) (local.get $row_bytes))))
            (loop $k
              (local.set $w0 (v128.load (local.get $wp)))
              (local.set $w1 (v128.load offset=16 (local.get $wp)))
              (local.set $a (f32x4.splat (f32.load (local.get $xk))))
              (local.set $c00 (f32x4.add (local.get $c00) (f32x4.mul (local.get $a) (local.get $w0))))
              (local.set $c01 (f32x4.add (local.get $c01) (f32x4.mul (local.get $a) (local.get $w1))))
              (local.set $a (f32x4.splat (f32.load (i32.add (local.get $xk) (local.get $r1)))))
              (local.set $c10 (f32x4.add (local.get $c10) (f32x4.mul (local.get $a) (local.get $w0))))
              (local.set $c11 (f32x4.add (local.get $c11) (f32x4.mul (local.get $a) (local.get $w1))))
              (local.set $a (f32x4.splat (f32.load (i32.add (local.get $xk) (local.get $r2)))))
              (local.set $c20 (f32x4.add (local.get $c20) (f32x4.mul (local.get $a) (local.get $w0))))
              (local.set $c21 (f32x4.add (local.get $c21) (f32x4.mul (local.get $a) (local.get $w1))))
              (local.set $a (f32x4.splat (f32.load (i32.add (local.get $xk) (local.get $r3)))))
              (local.set $c30 (f32x4.add (local.get $c30) (f32x4.mul (local.get $a) (local.get $w0))))
              (local.set $c31 (f32x4.add (local.get $c31) (f32x4.mul (local.get $a) (local.get $w1))))
              (local.set $wp (i32.add (local.get $wp) (i32.const 32)))
              (local.set $xk (i32.add (local.get $xk) (i32.const 4)))
              (br_if $k (i32.lt_u (local.get $wp) (local.get $w_end))))
            (local.set $op (i32.add (local.get $out)
              (i32.add (i32.mul (local.get $i) (local.get $out_row_bytes)) (i32.shl (local.get $panel) (i32.const 5)))))
            (v128.store (local.get $op) (f32x4.add (local.get $c00) (local.get $bias0)))
            (v128.store offset=16 (local.get $op) (f32x4.add (local.get $c01) (local.get $bias1)))
            (local.set $op (i32.add (local.get $op) (local.get $out_row_bytes)))
            (v128.store (local.get $op) (f32x4.add (local.get $c10) (local.get $bias0)))
            (v128.store offset=16 (local.get $op) (f32x4.add (local.get $c11) (local.get $bias1)))
            (local.set $op (i32.add (local.get $op) (local.get $out_row_bytes)))
            (v128.store (local.get $op) (f32x4.add (local.get $c20) (local.get $bias0)))
            (v128.store offset=16 (local.get $op) (f32x4.add (local.get $c21) (local.get $bias1)))
            (local.set $op (i32.add (local.get $op) (local.get $out_row_bytes)))
            (v128.store (local.get $op) (f32x4.add (local.get $c30) (local.get $bias0)))
            (v128.store offset=16 (local.get $op) (f32x4.add (local.get $c31) (local.get $bias1)))
            (local.set $i (i32.add (local.get $i) (i32.const 4)))
            (br $rows4)))
        ;; the last rows, one at a time
        (block $rows1_done
          (loop $rows1
            (br_if $rows1_done (i32.ge_u (local.get $i) (local.get $n)))
            (local.set $c00 (v128.const i32x4 0 0 0 0)) (local.set $c01 (v128.const i32x4 0 0 0 0))
            (local.set $wp (i32.add (local.get $w) (i32.mul (local.get $panel) (local.get $panel_bytes))))
            (local.set $w_end (i32.add (local.get $wp) (local.get $panel_bytes)))
            (local.set $xk (i32.add (local.get $x) (i32.mul (local.get $i) (local.get $row_bytes))))
            (loop $k1
              (local.set $a (f32x4.splat (f32.load (local.get $xk))))
              (local.set $c00 (f32x4.add (local.get $c00) (f32x4.mul (local.get $a) (v128.load (local.get $wp)))))
              (local.set $c01 (f32x4.add (local.get $c01) (f32x4.mul (local.get $a) (v128.load offset=16 (local.get $wp)))))
              (local.set $wp (i32.add (local.get $wp) (i32.const 32)))
              (local.set $xk (i32.add (local.get $xk) (i32.const 4)))
              (br_if $k1 (i32.lt_u (local.get $wp) (local.get $w_end))))
            (local.set $op (i32.add (local.get $out)
              (i32.add (i32.mul (local.get $i) (local.get $out_row_bytes)) (i32.shl (local.get $panel) (i32.const 5)))))
            (v128.store (local.get $op) (f32x4.add (local.get $c00) (local.get $bias0)))
            (v128.store offset=16 (local.get $op) (f32x4.add (local.get $c01) (local.get $bias1)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $rows1)))
        (local.set $panel (i32.add (local.get $panel) (i32.const 1)))
        (br $panel_loop)))))
