"""The management REST API at ``/api/v1/`` (Django REST framework): docs/api.md.

``authentication`` (personal API tokens, OAuth tokens for the API's resource, sessions),
``permissions`` (Django model permissions per action), ``errors`` (one error body),
``pagination``, ``filters``, ``serializers``, ``views`` and ``urls``. Writes go through the
ORM or services exactly as the admin's do, so catalog signals bump versions and notify.
"""
