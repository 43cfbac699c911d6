"""ONNX's own node test cases through gingham.onnx.backend, on every device.

The cases ship inside the onnx package (``onnx.backend.test.case.node``): a one-node model (or
its ``_expanded`` function body) with inputs and the outputs ONNX computed for them, an oracle
independent of gingham. The wheel carries the case definitions, not the ``data/node`` files,
so the cases are collected from the definitions (``collect_testcases``, what ONNX's
``backend-test-tools generate-data`` writes to disk).

Every case compiles a program per device, so the list below is a representative subset of the
supported ops (each op's attribute variants: pads, auto_pad, strides, opset-dependent forms),
not every case.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, numpy_helper  # noqa: E402

from gingham.onnx import backend  # noqa: E402

CASES = [
    # elementwise, activations
    "test_add_bcast", "test_sub_bcast", "test_mul_bcast", "test_div_bcast", "test_pow_bcast_array",
    "test_neg", "test_abs", "test_sqrt", "test_exp", "test_log", "test_reciprocal", "test_ceil",
    "test_floor", "test_cos", "test_sin", "test_sign", "test_selu", "test_max_example",
    "test_min_example", "test_mean_example", "test_sum_example", "test_and_bcast4v2d",
    "test_or_bcast3v1d", "test_xor4d", "test_not_2d", "test_greater_equal_bcast",
    "test_less_equal", "test_argmax_negative_axis_keepdims_random",
    "test_argmin_no_keepdims_random",
    "test_relu", "test_leakyrelu", "test_elu", "test_sigmoid", "test_tanh", "test_softplus",
    "test_hardsigmoid", "test_hardswish", "test_gelu_default_2", "test_gelu_tanh_2", "test_erf",
    "test_clip", "test_clip_default_min", "test_clip_default_int8_inbounds",
    "test_prelu_broadcast", "test_where_long_example", "test_equal_bcast", "test_less",
    "test_greater", "test_cast_FLOAT_to_DOUBLE", "test_cast_FLOAT16_to_FLOAT",
    # contractions, convolutions
    "test_gemm_all_attributes", "test_gemm_default_vector_bias", "test_gemm_transposeA",
    "test_matmul_4d", "test_matmul_bcast", "test_matmul_1d_3d",
    "test_conv_with_strides_and_asymmetric_padding", "test_conv_with_autopad_same",
    "test_conv_with_strides_padding", "test_convtranspose_1d", "test_convtranspose_pads",
    "test_convtranspose_output_shape", "test_convtranspose_autopad_same",
    "test_convtranspose_group_2", "test_convtranspose_dilations",
    # pooling, normalisation
    "test_maxpool_2d_pads", "test_maxpool_2d_same_lower", "test_maxpool_2d_ceil",
    "test_maxpool_2d_dilations", "test_maxpool_1d_default", "test_maxpool_3d_default",
    "test_averagepool_2d_pads_count_include_pad", "test_averagepool_2d_same_upper",
    "test_averagepool_2d_ceil", "test_averagepool_2d_precomputed_pads",
    "test_globalaveragepool", "test_globalmaxpool",
    "test_batchnorm_epsilon", "test_batchnorm_example_training_mode",
    "test_batchnorm_epsilon_training_mode", "test_instancenorm_example",
    "test_layer_normalization_3d_axis1_epsilon_expanded",
    "test_layer_normalization_4d_axis_negative_2",
    "test_softmax_axis_0", "test_softmax_default_axis", "test_logsoftmax_axis_1",
    "test_softmax_axis_1_expanded",
    # reductions
    "test_reduce_mean_keepdims_random", "test_reduce_sum_negative_axes_keepdims_random",
    "test_reduce_sum_empty_axes_input_noop", "test_reduce_max_do_not_keepdims_random",
    "test_reduce_min_default_axes_keepdims_random",
    # shapes
    "test_flatten_negative_axis1", "test_reshape_negative_extended_dims",
    "test_reshape_zero_and_negative_dim", "test_transpose_all_permutations_2",
    "test_squeeze_negative_axes", "test_unsqueeze_unsorted_axes", "test_concat_3d_axis_negative_2",
    "test_split_variable_parts_2d_opset18", "test_split_equal_parts_1d_opset13",
    "test_slice_neg_steps", "test_slice_negative_axes", "test_slice_end_out_of_bounds",
    "test_gather_1", "test_gather_negative_indices", "test_gather_2d_indices",
    "test_expand_dim_changed", "test_shape_start_1_end_negative_1", "test_constantofshape_int_zeros",
    "test_range_float_type_positive_delta", "test_dropout_default", "test_dropout_default_mask_ratio",
    "test_training_dropout_zero_ratio", "test_training_dropout_zero_ratio_mask", "test_identity",
    "test_constant", "test_upsample_nearest",
    "test_constant_pad", "test_constant_pad_axes", "test_edge_pad", "test_reflect_pad",
    "test_wrap_pad", "test_size",
    "test_resize_upsample_scales_nearest", "test_resize_downsample_sizes_nearest",
    "test_resize_upsample_sizes_nearest_ceil_half_pixel",
    "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
    "test_resize_downsample_scales_cubic_align_corners",
    "test_resize_downsample_scales_cubic_antialias", "test_resize_downsample_scales_linear",
    "test_resize_downsample_scales_linear_antialias",
    "test_resize_downsample_scales_linear_half_pixel_symmetric",
    "test_resize_downsample_sizes_cubic_antialias",
    "test_resize_downsample_sizes_linear_antialias",
    "test_resize_downsample_sizes_linear_pytorch_half_pixel",
    "test_resize_downsample_sizes_nearest_not_larger",
    "test_resize_downsample_sizes_nearest_not_smaller", "test_resize_tf_crop_and_resize",
    "test_resize_tf_crop_and_resize_axes_3_2",
    "test_resize_tf_crop_and_resize_extrapolation_value", "test_resize_upsample_scales_cubic",
    "test_resize_upsample_scales_cubic_asymmetric",
    "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
    "test_resize_upsample_scales_linear_align_corners",
    "test_resize_upsample_scales_linear_half_pixel_symmetric",
    "test_resize_upsample_scales_nearest_axes_3_2", "test_resize_upsample_sizes_cubic",
    "test_resize_upsample_sizes_nearest_floor_align_corners",
    "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric",
    "test_resize_upsample_sizes_nearest_not_larger",
    # indexing
    "test_gather_elements_1", "test_gather_elements_negative_indices",
    "test_gathernd_example_float32", "test_gathernd_example_int32_batch_dim1",
    "test_scatter_with_axis", "test_scatter_elements_with_negative_indices",
    "test_scatter_elements_with_duplicate_indices", "test_scatternd", "test_scatternd_add",
    "test_top_k", "test_top_k_smallest", "test_top_k_same_values_2d", "test_compress_0",
    "test_compress_default_axis",
    # shapes
    "test_tile", "test_tile_precomputed", "test_depthtospace_example",
    "test_depthtospace_crd_mode_example", "test_spacetodepth", "test_spacetodepth_example",
    "test_tril", "test_tril_neg", "test_tril_out_pos", "test_triu", "test_triu_one_row",
    "test_triu_square_neg", "test_eyelike_populate_off_main_diagonal", "test_eyelike_with_dtype",
    "test_eyelike_without_dtype", "test_einsum_batch_diagonal", "test_einsum_batch_matmul",
    "test_einsum_inner_prod", "test_einsum_sum", "test_einsum_transpose", "test_lrn",
    "test_lrn_default", "test_lpnormalization_default", "test_mvn",
    "test_group_normalization_epsilon", "test_group_normalization_example",
    # math
    "test_acos", "test_acosh", "test_asin", "test_asinh", "test_atan", "test_atanh", "test_tan",
    "test_sinh", "test_cosh", "test_round", "test_mod_mixed_sign_float32",
    "test_mod_float32_mixed_sign_fmod_0", "test_mod_float_edge_cases_fmod_0_float32",
    "test_mod_float16_mixed_sign_fmod_0", "test_mod_mixed_sign_int32", "test_mod_int64_fmod",
    "test_mod_uint8", "test_mod_broadcast", "test_isnan", "test_isinf", "test_isinf_positive",
    "test_isinf_negative", "test_isinf_float16", "test_mish", "test_softsign", "test_celu",
    "test_shrink_hard", "test_shrink_soft", "test_thresholdedrelu",
    "test_thresholdedrelu_default", "test_swish", "test_hardmax_example",
    "test_det_2d", "test_det_nd",
    "test_hardmax_one_hot", "test_hardmax_axis_0", "test_hardmax_negative_axis",
    "test_castlike_FLOAT_to_DOUBLE", "test_castlike_FLOAT16_to_FLOAT",
    "test_castlike_FLOAT_to_BFLOAT16", "test_bitshift_left_uint8", "test_bitshift_right_uint64",
    "test_bitshift_left_int64", "test_bitshift_right_int8_negative_input",
    "test_bitshift_left_int8_overflow", "test_bitshift_right_int32_shift_ge_width",
    "test_bitshift_left_int32_shift_ge_width", "test_bitshift_right_int8_negative_shift",
    "test_bitshift_left_int32_negative_shift", "test_bitwise_and_i32_2d",
    "test_bitwise_or_ui8_bcast_4v3d", "test_bitwise_xor_ui64_bcast_3v1d", "test_bitwise_not_3d",
    "test_reduce_l1_keep_dims_random", "test_reduce_l1_empty_set",
    "test_reduce_l2_do_not_keepdims_random", "test_reduce_l2_empty_set",
    "test_reduce_log_sum_desc_axes", "test_reduce_log_sum_default",
    "test_reduce_log_sum_exp_negative_axes_keepdims_random", "test_reduce_log_sum_exp_empty_set",
    "test_reduce_sum_square_default_axes_keepdims_random",
    "test_reduce_sum_square_do_not_keepdims_example",
    "test_cumsum_1d_reverse_exclusive", "test_cumsum_2d_negative_axis",
    "test_cumsum_1d_int32_exclusive", "test_cumprod_1d_reverse_exclusive",
    "test_cumprod_2d_int32", "test_cumprod_2d_axis_0",
    "test_nllloss_NC", "test_nllloss_NCd1d2_with_weight_reduction_mean",
    "test_nllloss_NCd1_mean_weight_negative_ii", "test_nllloss_NCd1d2d3_sum_weight_high_ii",
    "test_sce_mean", "test_sce_none_weights", "test_sce_mean_weight_ii_3d_log_prob",
    "test_sce_NCd1d2d3_sum_weight_high_ii_log_prob",
    # rnn
    "test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes",
    "test_lstm_batchwise", "test_lstm_bidirectional", "test_lstm_reverse", "test_gru_defaults",
    "test_gru_with_initial_bias", "test_gru_seq_length", "test_gru_batchwise",
    "test_gru_bidirectional", "test_gru_reverse", "test_rnn_seq_length",
    "test_simple_rnn_defaults", "test_simple_rnn_with_initial_bias", "test_simple_rnn_batchwise",
    "test_simple_rnn_bidirectional", "test_simple_rnn_reverse", "test_if", "test_loop11",
    "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state", "test_scan9_scalar",
    # shapes II
    "test_onehot_with_axis", "test_onehot_negative_indices", "test_onehot_out_of_range_indices",
    "test_onehot_with_negative_axis", "test_onehot_without_axis",
    "test_rms_normalization_3d_axis1_epsilon", "test_rms_normalization_4d_axis_negative_2",
    "test_rms_normalization_default_axis", "test_lppool_1d_default", "test_lppool_2d_default",
    "test_lppool_2d_dilations", "test_lppool_2d_pads", "test_lppool_2d_same_lower",
    "test_lppool_2d_strides", "test_lppool_3d_default", "test_reversesequence_batch",
    "test_reversesequence_time", "test_center_crop_pad_crop_and_pad",
    "test_center_crop_pad_crop_axes_chw", "test_center_crop_pad_crop_negative_axes_hwc",
    "test_center_crop_pad_pad", "test_onehot_with_bfloat16_values",
    "test_reversesequence_bfloat16",
    # signal
    "test_dft", "test_dft_axis", "test_dft_inverse", "test_dft_rfft", "test_dft_irfft",
    "test_dft_opset19", "test_dft_axis_opset19", "test_dft_inverse_opset19",
    "test_dft_rfft_opset19", "test_dft_irfft_opset19", "test_stft", "test_stft_with_window",
    "test_hannwindow", "test_hannwindow_symmetric", "test_hammingwindow",
    "test_hammingwindow_symmetric", "test_blackmanwindow", "test_blackmanwindow_symmetric",
    "test_melweightmatrix",
    # quantization
    "test_quantizelinear", "test_quantizelinear_axis", "test_quantizelinear_blocked_asymmetric",
    "test_quantizelinear_blocked_symmetric", "test_quantizelinear_int16",
    "test_quantizelinear_uint16", "test_dequantizelinear", "test_dequantizelinear_axis",
    "test_dequantizelinear_blocked", "test_dequantizelinear_int16",
    "test_dynamicquantizelinear", "test_dynamicquantizelinear_max_adjusted",
    "test_dynamicquantizelinear_min_adjusted_expanded", "test_matmulinteger",
    "test_convinteger_with_padding", "test_convinteger_without_padding",
    "test_qlinearmatmul_2D_uint8_float32", "test_qlinearmatmul_3D_int8_float32",
    "test_qlinearmatmul_2D_int8_float16", "test_qlinearconv",
    # attention
    "test_attention_4d", "test_attention_4d_gqa_causal", "test_attention_4d_attn_mask_bool_4d",
    "test_attention_4d_attn_mask_3d_causal", "test_attention_4d_diff_heads_sizes_scaled",
    "test_attention_4d_softcap_neginf_mask", "test_attention_4d_with_qk_matmul_softmax",
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal",
    "test_attention_3d_gqa_with_past_and_present", "test_attention_3d_diff_heads_sizes_softcap",
    "test_attention_4d_causal_nonpad_batch_prefill",
    "test_attention_4d_diff_heads_mask4d_padded_kv",
    "test_attention_local_window_ext_cache_rank3_head_mask", "test_attention_bidirectional_window",
    "test_attention_23_boolmask_fullymasked_row_nan_robustness",
    "test_attention_24_fullymasked_qk_matmul_output_mode3_zero", "test_rotary_embedding",
    "test_rotary_embedding_3d_input", "test_rotary_embedding_with_interleaved_rotary_dim",
    "test_rotary_embedding_no_position_ids_rotary_dim", "test_swiglu_alpha", "test_swiglu_float16",
    # patches, unpooling
    "test_col2im_pads", "test_col2im_dilations", "test_col2im_strides",
    "test_maxunpool_export_with_output_shape", "test_maxunpool_export_without_output_shape",
    # sampling
    "test_gridsample", "test_gridsample_zeros_padding", "test_gridsample_border_padding",
    "test_gridsample_reflection_padding", "test_gridsample_bilinear",
    "test_gridsample_aligncorners_true", "test_gridsample_nearest", "test_gridsample_bicubic",
    "test_gridsample_nearest_align_corners_0_additional_1",
    "test_gridsample_nearest_align_corners_1_additional_1",
    "test_gridsample_bilinear_align_corners_0_additional_1",
    "test_gridsample_bilinear_align_corners_1_additional_1",
    "test_gridsample_bicubic_align_corners_0_additional_1",
    "test_gridsample_bicubic_align_corners_1_additional_1",
    "test_gridsample_volumetric_nearest_align_corners_0",
    "test_gridsample_volumetric_nearest_align_corners_1",
    "test_gridsample_volumetric_bilinear_align_corners_0",
    "test_gridsample_volumetric_bilinear_align_corners_1", "test_affine_grid_2d",
    "test_affine_grid_2d_align_corners", "test_affine_grid_3d",
    "test_affine_grid_3d_align_corners", "test_roialign_aligned_false",
    "test_roialign_aligned_true", "test_roialign_mode_max",
    # sequences, optionals
    "test_sequence_insert_at_back", "test_sequence_insert_at_front", "test_split_to_sequence_1",
    "test_split_to_sequence_nokeepdims", "test_optional_get_element_sequence",
    "test_optional_get_element_optional_tensor", "test_optional_has_element_empty_optional_input",
    # value-shaped ops, on the host between compiled segments
    "test_nonzero_example", "test_unique_sorted_without_axis", "test_unique_not_sorted_without_axis",
    "test_unique_sorted_with_axis", "test_unique_sorted_with_axis_3d",
    "test_unique_sorted_with_negative_axis", "test_unique_length_1",
    "test_nonmaxsuppression_suppress_by_IOU", "test_nonmaxsuppression_suppress_by_IOU_and_scores",
    "test_nonmaxsuppression_flipped_coordinates", "test_nonmaxsuppression_limit_output_size",
    "test_nonmaxsuppression_single_box", "test_nonmaxsuppression_identical_boxes",
    "test_nonmaxsuppression_center_point_box_format", "test_nonmaxsuppression_two_classes",
    "test_nonmaxsuppression_two_batches", "test_nonmaxsuppression_iou_threshold_boundary",
    "test_sequence_map_identity_1_sequence_1_tensor", "test_sequence_map_add_2_sequences",
    "test_sequence_map_add_1_sequence_1_tensor", "test_sequence_map_extract_shapes",
    "test_tensorscatter", "test_tensorscatter_circular", "test_tensorscatter_3d",
    "test_basic_deform_conv_with_padding", "test_basic_deform_conv_without_padding",
    "test_deform_conv_with_mask_bias", "test_deform_conv_with_multiple_offset_groups",
    "test_causal_conv_with_state_basic", "test_causal_conv_with_state_with_bias_and_past_state",
    "test_causal_conv_with_state_silu_with_past_state", "test_causal_conv_with_state_decode_step",
    "test_causal_conv_with_state_kernel_size_one", "test_causal_conv_with_state_swish_alias",
    "test_causal_conv_with_state_short_input_no_past_state", "test_causal_conv_with_state_fp16",
    "test_linear_attention_linear", "test_linear_attention_gated",
    "test_linear_attention_gated_per_head_decay", "test_linear_attention_delta",
    "test_linear_attention_gated_delta", "test_linear_attention_gated_delta_beta_scalar",
    "test_linear_attention_gated_delta_gqa", "test_linear_attention_gated_delta_mqa",
    "test_linear_attention_decode_step", "test_linear_attention_prefill_with_past",
    "test_linear_attention_explicit_scale", "test_linear_attention_fp16",
    "test_linear_attention_linear_t1_no_past",
]


def _collect() -> dict:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {case.name: case for case in collect_testcases(None)}


_ALL = _collect()


def _array(value):
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def test_the_chosen_cases_exist():
    missing = [name for name in CASES if name not in _ALL]
    assert not missing, f"not among onnx's node cases any more: {missing}"


def _input(value):
    """A case's input: an array, a list of arrays (a sequence) or None (an empty optional)."""
    if value is None or isinstance(value, list):
        return value if value is None else [_array(v) for v in value]
    return _array(value)


def _assert_close(got, want, case, name: str) -> None:
    if isinstance(want, list):  # a sequence
        assert isinstance(got, list) and len(got) == len(want), name
        for got_one, want_one in zip(got, want):
            _assert_close(got_one, want_one, case, name)
        return
    want = _array(want)
    assert got.shape == want.shape and got.dtype == want.dtype, name
    # ONNX's own tolerances (1e-3 relative, 1e-7 absolute) and a float32-sized absolute
    # floor for values near zero.
    np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5),
                               err_msg=name)


@pytest.mark.parametrize("name", [n for n in CASES if n in _ALL])
def test_node_case(name, device):
    case = _ALL[name]
    for inputs, expected in case.data_sets:
        outputs = backend.run_model(case.model, [_input(v) for v in inputs], device)
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            _assert_close(got, want, case, name)


def _global_lp_pools() -> onnx.ModelProto:
    """GlobalLpPool with p = 1, 2 and 3 on one input (ONNX ships no node case for it)."""
    from onnx import helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
    outputs = [helper.make_tensor_value_info(f"y{p}", TensorProto.FLOAT, [2, 3, 1, 1])
               for p in (1, 2, 3)]
    nodes = [helper.make_node("GlobalLpPool", ["x"], [f"y{p}"], p=p) for p in (1, 2, 3)]
    graph = helper.make_graph(nodes, "global_lp_pools", [x], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


def _models_of_other_tests() -> dict:
    """The models that tests/onnx/test_ops_random.py checks by distribution (ONNX's random
    cases compare NumPy's numbers), tests/onnx/test_ops_sequence.py against ONNX's
    reference (ONNX has no node case of most sequence ops) and tests/onnx/test_ops_detection.py
    against onnxruntime (MaxRoiPool has no node case)."""
    from test_ops_detection import _model as _detection_model  # tests/onnx/...
    from test_ops_random import _random_model  # tests/onnx/test_ops_random.py
    from test_ops_sequence import _sequence_model  # tests/onnx/test_ops_sequence.py

    return {"random": _random_model, "sequence": _sequence_model,
            "detection": _detection_model}


#: models of ops without a (comparable) ONNX node case, each checked against its own oracle
EXTRA_MODELS = {"global_lp_pools": _global_lp_pools, **_models_of_other_tests()}


def test_global_lp_pool(device):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    outputs = backend.run_model(_global_lp_pools(), [x], device)
    for p, got in zip((1, 2, 3), outputs):
        want = (np.abs(x.astype(np.float64)) ** p).sum((2, 3), keepdims=True) ** (1 / p)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"p={p}")


def test_supported_ops_have_cases():
    """Every converter runs in at least one chosen case or extra model (ReduceProd folds
    shapes on the host only: no case runs it on a device)."""
    from gingham.onnx import supported_ops

    covered = {node.op_type for name in CASES for node in _ALL[name].model.graph.node}
    covered |= {node.op_type for make in EXTRA_MODELS.values() for node in make().graph.node}
    assert set(supported_ops()) - covered == {"ReduceProd"}


@pytest.mark.parametrize("name, opset16_mode", [("test_gridsample_bicubic", "bicubic"),
                                                ("test_gridsample_bilinear", "bilinear")])
def test_gridsample_opset16_mode_names(name, opset16_mode, device):
    """Opset 16 spelled GridSample's modes ``bilinear`` and ``bicubic`` (20 renamed them
    ``linear`` and ``cubic``): ONNX's opset-22 case, renamed back, gives its expected output."""
    case = _ALL[name]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    (node,) = model.graph.node
    for attribute in node.attribute:
        if attribute.name == "mode":
            attribute.s = opset16_mode.encode()
    model.opset_import[0].version = 16
    for inputs, expected in case.data_sets:
        (got,) = backend.run_model(model, [_input(v) for v in inputs], device)
        _assert_close(got, expected[0], case, name)


def test_scatters_of_a_shape_fold_on_the_host(device):
    """ScatterElements and ScatterND writing sizes into a Shape (the TorchScript exporter's
    ``index_copy`` / ``shape[i] = n``) fold on the host, so a Reshape can read the result."""
    import ort_oracle  # tests/onnx/ort_oracle.py
    from onnx import helper

    ints = [helper.make_tensor(name, TensorProto.INT64, shape, values) for name, shape, values
            in (("axes", [2], [1, 2]), ("sizes", [2], [4, 3]), ("rows", [2, 1], [2, 1]),
                ("backwards", [2], [3, 4]), ("zeros", [1], [0]), ("none", [1, 1], [0]))]
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ScatterElements", ["shape", "axes", "sizes"], ["by_axis"]),
             helper.make_node("ScatterND", ["by_axis", "none", "zeros"], ["added"],
                              reduction="add"),
             helper.make_node("ScatterND", ["shape", "rows", "backwards"], ["by_row"]),
             helper.make_node("Reshape", ["x", "added"], ["y1"]),
             helper.make_node("Reshape", ["x", "by_row"], ["y2"])]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [2, 4, 3]) for y in ("y1", "y2")]
    graph = helper.make_graph(nodes, "shape_scatters",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              outputs, ints)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got, want = ort_oracle.both(ort_oracle.make_model(graph, 18), {"x": x}, device)
    ort_oracle.assert_close(got, want, ["y1", "y2"], rtol=0)
    np.testing.assert_array_equal(got[0], x.reshape(2, 4, 3))
