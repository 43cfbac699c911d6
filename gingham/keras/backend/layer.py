"""The layer mixin Keras' ``Layer`` inherits from: gingham's layers need nothing extra
(a variable is tracked by Keras itself, its tensor by gingham's graph)."""


class GinghamLayer:
    pass


NumpyLayer = GinghamLayer  # the name keras.src.layers.layer imports from this slot
