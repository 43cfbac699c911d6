"""Model export (SavedModel and the like) is not implemented for gingham yet."""


class GinghamExportArchive:
    def track(self, resource):
        raise NotImplementedError("export (track) is not implemented by gingham's Keras backend")

    def add_endpoint(self, name, fn, input_signature=None, **kwargs):
        raise NotImplementedError("export (add_endpoint) is not implemented by gingham's Keras "
                                  "backend")


NumpyExportArchive = GinghamExportArchive  # the name keras.src.export imports from this slot
