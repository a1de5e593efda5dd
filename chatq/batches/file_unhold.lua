-- An upload ended without a file (refused, cut, or its request failed): its hold gives its
-- room in the key's quota back. Arguments: owner, id (the upload's). Answers 1.
release_file_hold(owner, id)
return 1
