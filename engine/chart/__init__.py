"""A pipeline as a Helm chart (`zync build`): one Deployment per loop role (:mod:`.roles`),
its values and their schema (:mod:`.values`), written by :mod:`.build` from the templates
under ``files/``."""
