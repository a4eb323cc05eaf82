"""LayerHelper: what every layer function uses to create parameters, temporaries and ops, with Fluid's
naming (``fc_0.w_0``, ``fc_0.b_0``, ``fc_0.tmp_0``)."""
import copy

from . import unique_name
from .framework import Variable, convert_np_dtype_to_dtype_, default_main_program, default_startup_program, dtype_to_str
from .param_attr import ParamAttr


class LayerHelper:
    def __init__(self, layer_type, **kwargs):
        self.kwargs = kwargs
        self.layer_type = layer_type
        name = kwargs.get("name")
        self.name = name if name is not None else unique_name.generate(layer_type)

    @property
    def main_program(self):
        return default_main_program()

    @property
    def startup_program(self):
        return default_startup_program()

    def append_op(self, *args, **kwargs):
        return self.main_program.current_block().append_op(*args, **kwargs)

    def multiple_input(self, input_param_name="input"):
        inputs = self.kwargs.get(input_param_name, [])
        if isinstance(inputs, Variable):
            return [inputs]
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError("%s: argument '%s' must be a Variable or a non-empty list of Variables, got %r"
                            % (self.layer_type, input_param_name, inputs))
        for v in inputs:
            if not isinstance(v, Variable):
                raise TypeError("%s: '%s' must contain Variables, got %s"
                                % (self.layer_type, input_param_name, type(v).__name__))
        return list(inputs)

    def input(self, input_param_name="input"):
        inputs = self.multiple_input(input_param_name)
        if len(inputs) != 1:
            raise TypeError("%s: '%s' takes exactly one Variable" % (self.layer_type, input_param_name))
        return inputs[0]

    @property
    def param_attr(self):
        return ParamAttr._to_attr(self.kwargs.get("param_attr"))

    @property
    def bias_attr(self):
        return ParamAttr._to_attr(self.kwargs.get("bias_attr"))

    def multiple_param_attr(self, length):
        attr = self.param_attr
        if isinstance(attr, ParamAttr):
            attr = [attr]
        if len(attr) != 1 and len(attr) != length:
            raise ValueError("%s: got %d param_attrs for %d inputs" % (self.layer_type, len(attr), length))
        if len(attr) == 1 and length != 1:
            attr = [copy.deepcopy(attr[0]) for _ in range(length)]
            for a in attr[1:]:
                if a.name is not None:
                    raise ValueError("%s: a named param_attr cannot be shared by several inputs" % self.layer_type)
        return attr

    def iter_inputs_and_params(self, input_param_name="input"):
        inputs = self.multiple_input(input_param_name)
        return zip(inputs, self.multiple_param_attr(len(inputs)))

    def input_dtype(self, input_param_name="input"):
        dtype = None
        for v in self.multiple_input(input_param_name):
            if dtype is None:
                dtype = v.dtype
            elif dtype != v.dtype:
                raise TypeError("%s: all inputs must have one dtype, got %s and %s" % (self.layer_type, dtype, v.dtype))
        return dtype

    def create_parameter(self, attr, shape, dtype, is_bias=False, default_initializer=None):
        if attr is False:
            return None
        name = dtype_to_str(convert_np_dtype_to_dtype_(dtype))
        if self.kwargs.get("input") is not None and name not in ("float16", "float32", "float64"):
            # A layer's parameters take its input's dtype: an integer input would get an integer weight that
            # no initializer fills (Fluid checks the input's dtype). layers.create_parameter may be any dtype.
            raise TypeError("%s: input %s must be float16, float32 or float64 (the layer's parameters take its "
                            "dtype), got %s" % (self.layer_type,
                                                ", ".join(v.name for v in self.multiple_input("input")), name))
        attr = copy.deepcopy(ParamAttr._to_attr(attr))
        if default_initializer is not None:
            attr._set_default_initializer(default_initializer)
        elif is_bias:
            attr._set_default_bias_initializer()
        else:
            attr._set_default_param_initializer()
        if attr.name is None:
            attr.name = unique_name.generate(".".join([self.name, "b" if is_bias else "w"]))
        shape = [int(s) for s in shape]
        dtype = convert_np_dtype_to_dtype_(dtype)
        self.startup_program.global_block().create_parameter(shape=shape, dtype=dtype,
                                                             **attr._to_kwargs(with_initializer=True))
        return self.main_program.global_block().create_parameter(shape=shape, dtype=dtype, **attr._to_kwargs())

    def create_variable_for_type_inference(self, dtype, stop_gradient=False):
        """A temporary whose shape the op's shape inference fills in: ``<layer>.tmp_N``."""
        return self.main_program.current_block().create_var(
            name=unique_name.generate_with_ignorable_key(".".join([self.name, "tmp"])),
            dtype=dtype, persistable=False, stop_gradient=stop_gradient)

    create_tmp_variable = create_variable_for_type_inference

    def create_variable(self, *args, **kwargs):
        return self.main_program.current_block().create_var(*args, **kwargs)

    def create_global_variable(self, persistable=False, *args, **kwargs):
        return self.main_program.global_block().create_var(*args, persistable=persistable, **kwargs)

    def set_variable_initializer(self, var, initializer):
        sblock = self.startup_program.global_block()
        svar = sblock.create_var(name=var.name, type=var.type, dtype=var.dtype, shape=var.shape,
                                 persistable=True)
        initializer(svar, sblock)
        return var

    def append_bias_op(self, input_var, dim_start=1, dim_end=None):
        """input + b, with b of shape input.shape[dim_start:dim_end] broadcast at axis=dim_start."""
        size = list(input_var.shape[dim_start:dim_end])
        bias_attr = self.bias_attr
        if bias_attr is False:
            return input_var
        b = self.create_parameter(attr=bias_attr, shape=size, dtype=input_var.dtype, is_bias=True)
        tmp = self.create_variable_for_type_inference(dtype=input_var.dtype)
        self.append_op(type="elementwise_add", inputs={"X": [input_var], "Y": [b]}, outputs={"Out": [tmp]},
                       attrs={"axis": dim_start})
        return tmp

    def append_activation(self, input_var):
        act = self.kwargs.get("act")
        if act is None:
            return input_var
        if isinstance(act, str):
            act = {"type": act}
        else:
            act = dict(act)
        act_type = act.pop("type")
        tmp = self.create_variable_for_type_inference(dtype=input_var.dtype)
        self.append_op(type=act_type, inputs={"X": [input_var]}, outputs={"Out": [tmp]}, attrs=act)
        return tmp
